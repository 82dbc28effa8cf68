"""The traffic options of run, submit and sweep: ``--source`` and every registered request source's options.

Each source declares its options (:mod:`engine.spec.sources`); each option is a flag of its own,
``--<option-name>`` (``--time-scale``, ``--prompt-tokens``), typed from the option's own type, with its
description as help, plus the extra flags a source declares (``--trace-window START:DURATION``,
``--multi-turn``). A source added to the registry therefore has its flags here without edits. The
flags given become flat traffic fields; :mod:`engine.spec.sources.flat` reads them into the workload's
traffic (the source they name, or the one the ``--spec`` file has): fields that name two sources, or
that the source does not read, are refused in one line.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.cli.values import finite_float, int_arg
from engine.spec import SpecError, sources
from engine.spec.sources.flat import source_of

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from engine.jsonvalue import JSONMapping, JSONObject

ArgType = Callable[[str], object]  # an argparse type: the option's text to its value
_TYPES: dict[object, ArgType] = {int: int_arg, float: finite_float, str: str}


def _option_type(annotation: object) -> tuple[ArgType | None, bool]:
    """(argparse type, is a switch) of an option's annotation (optional or not)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = (
        args[0] if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1 else annotation
    )
    if base is bool:
        return None, True
    if typing.get_origin(base) is typing.Literal:
        return str, False
    if typing.get_origin(base) in (list, tuple) and typing.get_args(base):
        return _comma_list(_TYPES.get(typing.get_args(base)[0], str)), False
    return _TYPES.get(base, str), False


def _comma_list(item: ArgType) -> ArgType:
    """An argparse type: comma-separated values of ``item``'s type (``6,5,4``)."""

    def parse(text: str) -> list[object]:
        return [item(part.strip()) for part in text.split(",") if part.strip()]

    return parse


def _choices(annotation: object) -> str:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    inner = args[0] if len(args) == 1 else annotation
    return " | ".join(map(str, typing.get_args(inner))) if typing.get_origin(inner) is typing.Literal else ""


def _options() -> dict[str, tuple[FieldInfo, list[str]]]:
    """Every registered source's option -> (its field info, the sources that take it), once each."""
    out: dict[str, tuple[FieldInfo, list[str]]] = {}
    for cls in sources.all_sources():
        for name in cls.option_names():
            info, users = out.get(name, (cls.model_fields[name], []))
            out[name] = (info, [*users, sources.name_of(cls)])
    return out


def add_traffic_arguments(p: argparse.ArgumentParser) -> None:
    """``--source`` and every source's option flags (module doc), and the workload's ``--strict`` and cancellations."""
    d = p.add_argument_group("traffic: where the requests come from (engine/spec/sources)")
    d.add_argument("--source", metavar="NAME", help=f"the request source: {' | '.join(sources.names())}")
    for name, (info, users) in _options().items():
        kind, switch = _option_type(info.annotation)
        choices = _choices(info.annotation)
        what = f"{', '.join(users)}: {info.description or name.replace('_', ' ')}" + (
            f" ({choices})" if choices else ""
        )
        flag = "--" + name.replace("_", "-")
        if switch:
            d.add_argument(flag, dest=f"traffic_{name}", action=argparse.BooleanOptionalAction, help=what)
        else:
            d.add_argument(flag, dest=f"traffic_{name}", type=kind, metavar=name.split("_")[-1].upper(), help=what)
    for cls in sources.all_sources():
        for extra in cls.extra_flags:
            dest = "traffic_extra_" + extra.flag.lstrip("-").replace("-", "_")
            if extra.metavar is None:
                d.add_argument(extra.flag, dest=dest, action="store_true", default=None, help=extra.help)
            else:
                d.add_argument(extra.flag, dest=dest, metavar=extra.metavar, help=extra.help)
    d.add_argument("--strict", action="store_true", help="refuse prompts beyond the context (default: clip)")
    d.add_argument("--cancel-rate", type=finite_float, metavar="F", help="share of requests cancelled (0..1) ...")
    d.add_argument("--cancel-after-ms", type=finite_float, metavar="MS", help="... this long after their send")


def flat_traffic(args: argparse.Namespace) -> JSONObject:
    """The traffic flags given, as flat fields (``source`` too, where given); SpecError for a bad extra flag."""
    flat: JSONObject = {}
    if getattr(args, "source", None):
        flat["source"] = args.source
    for name in _options():
        value = getattr(args, f"traffic_{name}", getattr(args, name, None))
        if value is not None:
            flat[name] = value
    for cls in sources.all_sources():
        for extra in cls.extra_flags:
            value = getattr(args, "traffic_extra_" + extra.flag.lstrip("-").replace("-", "_"), None)
            if value is None:
                continue
            try:
                flat.update(extra.parse(value))
            except ValueError as exc:
                raise SpecError(str(exc)) from None
    return flat


def traffic_from_args(args: argparse.Namespace, workload: JSONObject) -> JSONObject:
    """``workload`` with the traffic flags given (module doc); ``--output-tokens N`` with a source that has its
    own output lengths fixes every request's length instead."""
    flat = flat_traffic(args)
    if getattr(args, "strict", False):
        workload["strict_lengths"] = True
    for key in ("cancel_rate", "cancel_after_ms"):
        if getattr(args, key, None) is not None:
            workload[key] = getattr(args, key)
    if not flat:
        return workload
    try:
        named = source_of(flat) if flat.get("source") or _names_a_source(flat) else None
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if named is not None and getattr(args, "output_tokens", None) is not None:
        if "source_output_lengths" in named.option_names():
            flat.setdefault("source_output_lengths", False)
    workload.update(flat)
    return workload  # a trace without --requests is replayed whole (its source's own default)


def _names_a_source(flat: JSONMapping) -> bool:
    return any(all(flat.get(k) for k in cls.selected_by) for cls in sources.all_sources() if cls.selected_by)
