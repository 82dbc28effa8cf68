"""Form widgets generated from pydantic spec fields (the Launch page's recipe, workload and sweep inputs).

A field's widget is chosen from its type: a select box for a ``Literal``, a checkbox for a
bool, a number input (with a "set" checkbox when it may be empty) for int and float, a
comma-separated text input for a list, a text input otherwise. A knob added to a recipe or
an option added to a request source therefore appears on the page without edits.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any, Literal

import streamlit as st

from engine.spec import SpecError, forms
from engine.spec.paths import RECIPE_PATH_FIELDS
from ui.input_folders import folders_note
from ui.text import escape_markdown

_SCALARS: dict[Any, str] = {bool: "bool", int: "int", float: "float", str: "str"}


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else annotation), True
    return annotation, False


def field_kind(annotation: Any) -> tuple[str, Any, bool]:
    """(kind, extra, optional): kind is literal|bool|int|float|str|list|other; extra the choices (a list: the
    kind of its items)."""
    base, optional = _unwrap_optional(annotation)
    if typing.get_origin(base) is Literal:
        return "literal", list(typing.get_args(base)), optional
    if typing.get_origin(base) in (list, tuple) and typing.get_args(base):
        return "list", _SCALARS.get(typing.get_args(base)[0], "str"), optional
    return _SCALARS.get(base, "other"), None, optional


def _bounds(info: Any) -> tuple[Any, Any, bool, bool]:
    """(low, high, low is exclusive, high is exclusive) of a numeric field; None where unbounded."""
    lo = hi = None
    lo_open = hi_open = False
    for m in info.metadata:
        for attr, is_low, is_open in (
            ("ge", True, False),
            ("gt", True, True),
            ("le", False, False),
            ("lt", False, True),
        ):
            bound = getattr(m, attr, None)
            if bound is None:
                continue
            if is_low:
                lo, lo_open = bound, is_open
            else:
                hi, hi_open = bound, is_open
    return lo, hi, lo_open, hi_open


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,g}"


def field_problem(name: str, info: Any, value: Any) -> str | None:
    """What is wrong with a number the form holds, in words ("Prompt tokens: at most 1,000,000 (10,000,000 given)")."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    lo, hi, lo_open, hi_open = _bounds(info)
    text = forms.label(name)
    if lo is not None and (value <= lo if lo_open else value < lo):
        return f"{text}: {'more than' if lo_open else 'at least'} {_number(lo)} ({_number(value)} given)"
    if hi is not None and (value >= hi if hi_open else value > hi):
        return f"{text}: {'less than' if hi_open else 'at most'} {_number(hi)} ({_number(value)} given)"
    return None


def _range_help(info: Any) -> str | None:
    lo, hi, lo_open, hi_open = _bounds(info)
    parts = [
        f"{word} {_number(bound)}"
        for bound, word in ((lo, "more than" if lo_open else "at least"), (hi, "less than" if hi_open else "at most"))
        if bound is not None
    ]
    return ", ".join(parts) or None


def _literal_widget(label: str, choices: list[Any], optional: bool, default: Any, **kw: Any) -> Any:
    options = ([None] if optional else []) + choices
    index = options.index(default) if default in options else 0
    return st.selectbox(label, options, index=index, format_func=lambda v: "(none)" if v is None else str(v), **kw)


def _number_widget(label: str, kind: str, optional: bool, default: Any, **kw: Any) -> Any:
    """A number input WITHOUT client-side bounds: the browser refuses to send an out-of-range value (the
    field turns red and the old value stays), so the range is checked here and said (:func:`field_problem`)."""
    cast = int if kind == "int" else float
    if optional:
        use = st.checkbox(label, value=default is not None, key=f"{kw['key']}__set", disabled=kw["disabled"])
        if not use:
            return None
        kw["label_visibility"] = "collapsed"
    value = default if default is not None else cast(0)
    return st.number_input(label, value=cast(value), step=cast(1) if kind == "int" else None, **kw)


def field_widget(
    name: str, info: Any, default: Any, key: str, disabled: bool = False, always_set: bool = False, note: str = ""
) -> Any:
    """One input for a pydantic field, chosen from its type and labelled in words; returns the value (None = unset).

    ``always_set``: an optional number asked as a plain value (its None is said by another field); ``note``: more
    help (a path field's allowed folders)."""
    kind, choices, optional = field_kind(info.annotation)
    label = forms.label(name)
    help_text = " · ".join(t for t in (info.description, _range_help(info), note) if t) or None
    kw: dict[str, Any] = {"key": key, "help": help_text, "disabled": disabled}
    if kind == "literal":
        return _literal_widget(label, choices, optional, default, **kw)
    if kind == "bool":
        return st.checkbox(label, value=bool(default), **kw)
    if kind in ("int", "float"):
        return _number_widget(label, kind, optional and not always_set, default, **kw)
    if kind == "list":
        return _list_widget(label, choices, optional, default, **kw)
    text = st.text_input(
        label, value="" if default is None else str(default), placeholder="(none)" if optional else None, **kw
    )
    return text or (None if optional else text)


def _list_widget(label: str, item_kind: str, optional: bool, default: Any, **kw: Any) -> Any:
    """A list typed as comma-separated values; what does not parse is returned as typed, and validation says why."""
    shown = ", ".join(str(v) for v in default) if default else ""
    text = st.text_input(f"{label} (comma-separated)", value=shown, placeholder="(none)" if optional else None, **kw)
    if not text.strip():
        return None if optional else []
    try:
        return parse_values(item_kind, text)
    except SpecError:
        return text


def state_value(info: Any, key: str, default: Any, always_set: bool = False) -> Any:
    """The value the widget for ``key`` holds now (before it is drawn this run): its state, else ``default``."""
    kind, extra, optional = field_kind(info.annotation)
    state = st.session_state
    if kind in ("int", "float") and optional and not always_set:
        if not state.get(f"{key}__set", default is not None):
            return None
        return state.get(key, default if default is not None else 0)
    value = state.get(key, default)
    if kind == "str" and optional and value == "":
        return None
    if kind == "list" and isinstance(value, str):
        try:
            return parse_values(extra, value) if value.strip() else (None if optional else [])
        except SpecError:
            return value
    return value


def parse_values(kind: str, text: str) -> list[Any]:
    """'1, 4, 16' -> [1, 4, 16] for a sweep field; raises SpecError."""
    out: list[Any] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(int(part) if kind == "int" else float(part) if kind == "float" else part)
        except ValueError as exc:
            raise SpecError(f"{part!r} is not a {kind}") from exc
    return out


def sweep_values_widget(section: str, name: str, info: Any, disabled: bool) -> tuple[list[Any], str | None]:
    """The values to sweep one field over, and the problem with them (None when fine)."""
    kind, choices, _ = field_kind(info.annotation)
    label, key = f"{forms.label(name)}: values", f"sweep_{section}_{name}"
    if kind in ("literal", "bool"):
        values = st.multiselect(label, choices if kind == "literal" else [False, True], key=key, disabled=disabled)
    else:
        text = st.text_input(f"{label} (comma-separated)", key=key, placeholder="1, 4, 16", disabled=disabled)
        try:
            values = parse_values(kind, text)
        except SpecError as exc:
            return [], f"{forms.label(name)}: {exc}"
    return values, (None if values else f"give at least one value for {forms.label(name)}")


def param_value(info: Any, raw: str) -> tuple[bool, Any]:
    """A query-parameter string as a value of the field: (usable, value)."""
    kind, choices, _ = field_kind(info.annotation)
    if kind == "bool":
        return True, raw.lower() in ("1", "true", "yes", "on")
    try:
        value: Any = {"int": int, "float": float}.get(kind, str)(raw)
    except ValueError:
        return False, None
    return not (kind == "literal" and value not in choices), value


def section_form(
    section: str,
    cls: Any,
    defaults: dict[str, Any],
    prefix: str,
    disabled: bool,
    device: str = "cpu",
    traffic: str | None = None,
    order: Sequence[str] = (),
) -> tuple[dict[str, Any], list[str]]:
    """Every field of a spec section (an engine's recipe, 'workload', or a request source's options
    ``source:NAME``): the basic ones at once, the rest in an "Advanced" expander, and a field nothing uses hidden
    (it submits its default). Returns (values, problems). A field naming a file the job reads (a source's
    ``file_field``, a recipe's draft model or calibration file) says in its help where such files may lie.

    Which fields show is decided from the values the widgets hold now, so a knob appears in the same run
    its parent is set, whatever the order of the fields. ``traffic`` (the workload's request source) hides the
    arrival process for a source that keeps its own schedule; ``order`` puts the fields it names first, in its
    order (a source's options, its file first)."""
    fields = {n: f for n, f in cls.model_fields.items() if n not in ("engine", "source", "traffic")}
    always = {n for n, f in fields.items() if f.is_required()}  # asked as plain values: no "set" box
    current = {n: state_value(f, prefix + n, defaults.get(n), n in always) for n, f in fields.items()}
    hidden = forms.hidden_fields(section, current, device, traffic)
    values: dict[str, Any] = {}
    problems: list[str] = []
    paths = {getattr(cls, "file_field", None), *RECIPE_PATH_FIELDS} & set(fields)  # files a job reads
    note = folders_note() if paths else ""

    def draw(names: list[str]) -> None:
        for name in names:
            info = fields[name]
            value = field_widget(
                name, info, defaults.get(name), prefix + name, disabled, name in always, note if name in paths else ""
            )
            problem = field_problem(name, info, value)
            if problem:
                st.error(escape_markdown(problem), icon=":material/error:")
                problems.append(problem)
            values[name] = value

    shown = [n for n in fields if n not in hidden]
    if order:
        shown.sort(key=lambda n: list(order).index(n) if n in order else len(order))
    basic = [n for n in shown if forms.is_basic(section, n)]
    advanced = [n for n in shown if not forms.is_basic(section, n)]
    draw(basic)
    if advanced:
        changed = sum(1 for n in advanced if current[n] != defaults.get(n))
        title = "Advanced" + (f" ({changed} set)" if changed else "")
        with st.expander(title, expanded=bool(changed)):
            draw(advanced)
    for name in hidden:
        values[name] = defaults.get(name)
    return {n: values[n] for n in fields}, problems
