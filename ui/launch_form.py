"""Form widgets generated from pydantic spec fields (the Launch page's recipe, workload and sweep inputs).

A field's widget is chosen from its type: a select box for a ``Literal``, a checkbox for a
bool, a number input (with a "set" checkbox when it may be empty) for int and float, a
text input otherwise. A knob added to a recipe therefore appears on the page without edits.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import streamlit as st

from engine.spec import SpecError

_SCALARS: dict[Any, str] = {bool: "bool", int: "int", float: "float", str: "str"}


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else annotation), True
    return annotation, False


def field_kind(annotation: Any) -> tuple[str, Any, bool]:
    """(kind, extra, optional): kind is literal|bool|int|float|str|other; extra the choices."""
    base, optional = _unwrap_optional(annotation)
    if typing.get_origin(base) is Literal:
        return "literal", list(typing.get_args(base)), optional
    return _SCALARS.get(base, "other"), None, optional


def _bounds(info: Any) -> tuple[Any, Any]:
    lo = hi = None
    for m in info.metadata:
        lo = getattr(m, "ge", lo) if getattr(m, "ge", None) is not None else lo
        hi = getattr(m, "le", hi) if getattr(m, "le", None) is not None else hi
    return lo, hi


def _literal_widget(label: str, choices: list[Any], optional: bool, default: Any, **kw: Any) -> Any:
    options = ([None] if optional else []) + choices
    index = options.index(default) if default in options else 0
    return st.selectbox(label, options, index=index, format_func=lambda v: "(none)" if v is None else str(v), **kw)


def _number_widget(label: str, info: Any, kind: str, optional: bool, default: Any, **kw: Any) -> Any:
    lo, hi = _bounds(info)
    cast = int if kind == "int" else float
    if optional:
        use = st.checkbox(
            f"set {label}",
            value=default is not None,
            key=f"{kw['key']}__set",
            disabled=kw["disabled"],
            help=kw["help"] or "unset: the engine's default",
        )
        if not use:
            return None
    value = default if default is not None else (lo if lo is not None else cast(0))
    return st.number_input(
        label,
        min_value=None if lo is None else cast(lo),
        max_value=None if hi is None else cast(hi),
        value=cast(value),
        step=cast(1) if kind == "int" else None,
        **kw,
    )


def field_widget(name: str, info: Any, default: Any, key: str, disabled: bool = False) -> Any:
    """One input for a pydantic field, chosen from its type; returns the value (None = unset)."""
    kind, choices, optional = field_kind(info.annotation)
    label = name.replace("_", " ")
    kw: dict[str, Any] = {"key": key, "help": info.description, "disabled": disabled}
    if kind == "literal":
        return _literal_widget(label, choices, optional, default, **kw)
    if kind == "bool":
        return st.checkbox(label, value=bool(default), **kw)
    if kind in ("int", "float"):
        return _number_widget(label, info, kind, optional, default, **kw)
    text = st.text_input(
        label, value="" if default is None else str(default), placeholder="(none)" if optional else None, **kw
    )
    return text or (None if optional else text)


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
    label, key = f"{section}.{name} values", f"sweep_{section}_{name}"
    if kind in ("literal", "bool"):
        values = st.multiselect(label, choices if kind == "literal" else [False, True], key=key, disabled=disabled)
    else:
        text = st.text_input(f"{label} (comma-separated)", key=key, placeholder="1, 4, 16", disabled=disabled)
        try:
            values = parse_values(kind, text)
        except SpecError as exc:
            return [], f"{section}.{name}: {exc}"
    return values, (None if values else f"give at least one value for {section}.{name}")


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
