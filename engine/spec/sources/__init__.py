"""The request sources LatencyLab knows: one line per source naming its options class, and the lookups every
caller uses.

A source is a class in this package (:class:`~engine.spec.sources.base.TrafficSource`: its options,
its words, the flat fields that name it) and a planner in :mod:`engine.run.sources` (named by the
class as ``"module:Class"``); adding one is one line in :data:`_REGISTERED`. ARCHITECTURE.md's
"How to add a request source" has the checklist.

:data:`Traffic` is the type of ``Workload.traffic``: a validation that picks the class of the source
the section names (``{"source": "trace", ...}``), among the sources registered now (a test can
register one with :func:`register`), and dumps as that class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import SerializeAsAny, ValidationInfo, ValidatorFunctionWrapHandler, WrapValidator

from engine.spec.base import SpecError, validate_chosen
from engine.spec.sources.base import LEGACY_FLAT_DEFAULTS, TrafficSource
from engine.spec.sources.dataset import DatasetTraffic
from engine.spec.sources.prefixes import PrefixesTraffic
from engine.spec.sources.prompt_file import PromptFileTraffic
from engine.spec.sources.sessions import SessionsTraffic
from engine.spec.sources.synthetic import SyntheticTraffic
from engine.spec.sources.trace import TraceTraffic

# One line per source, in the order the traffic choice lists them; the first is the default source.
_REGISTERED: list[type[TrafficSource]] = [
    SyntheticTraffic,
    PromptFileTraffic,
    DatasetTraffic,
    SessionsTraffic,
    PrefixesTraffic,
    TraceTraffic,
]


def name_of(cls: type[TrafficSource]) -> str:
    """The name a source class is registered under (its ``source`` field's one value)."""
    return str(cls.model_fields["source"].default)


def all_sources() -> tuple[type[TrafficSource], ...]:
    """Every registered source's class, in registry order."""
    return tuple(_REGISTERED)


def names() -> tuple[str, ...]:
    """Every registered source's name, in registry order (the traffic choice, ``--source``)."""
    return tuple(name_of(c) for c in _REGISTERED)


def find(name: object) -> type[TrafficSource] | None:
    """The class of source ``name``, or None when no source of that name is registered."""
    return next((c for c in _REGISTERED if name_of(c) == name), None)


def unknown_source(name: object) -> str:
    """The one line said for a source nobody registered."""
    return f"unknown request source {str(name)[:40]!r}; available: {', '.join(names())}"


def get(name: object) -> type[TrafficSource]:
    """The class of source ``name``; :class:`SpecError` naming the available ones when there is none."""
    found = find(name)
    if found is None:
        raise SpecError(unknown_source(name))
    return found


def default_traffic() -> TrafficSource:
    """The default source's options, each at its default (``Workload``'s default traffic)."""
    return _REGISTERED[0]()


def flat_field_names() -> frozenset[str]:
    """Every flat field some source reads (or old specs held), and ``source``: what a flat workload hands over."""
    out = set(LEGACY_FLAT_DEFAULTS) | {"source"}
    for cls in _REGISTERED:
        out |= cls.flat_names()
    return frozenset(out)


def option_labels() -> dict[str, str]:
    """Every source option in words (forms, messages); the first source to name a field names it."""
    out: dict[str, str] = {}
    for cls in _REGISTERED:
        out.update({k: v for k, v in cls.labels.items() if k not in out})
    return out


def register(cls: type[TrafficSource], taken: frozenset[str] = frozenset()) -> None:
    """Add a source at run time (tests register one and remove it afterwards); ValueError when its name is taken
    or an option shares a name with a workload field (``taken``: the workload's own fields)."""
    if find(name_of(cls)) is not None:
        raise ValueError(f"request source {name_of(cls)!r} is registered already")
    clash = sorted(set(cls.option_names()) & taken)
    if clash:
        raise ValueError(f"request source {name_of(cls)!r}: options {clash} are workload fields already")
    _REGISTERED.append(cls)


def unregister(name: str) -> None:
    """Remove a source added with :func:`register`."""
    _REGISTERED[:] = [c for c in _REGISTERED if name_of(c) != name]


# -- Workload.traffic: the class of the source the section names ---------------------------------
def _validate_traffic(value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> TrafficSource:
    """A traffic section as the class of the source it names (an options object as it is)."""
    if isinstance(value, TrafficSource):
        return value
    if not isinstance(value, Mapping):
        raise ValueError("Input should be a valid dictionary or object to extract fields from")
    if "source" not in value:
        raise ValueError(f"give the source: one of {', '.join(names())}")
    cls = find(value["source"])
    if cls is None:
        raise ValueError(unknown_source(value["source"]))
    return validate_chosen(cls, value, name_of(cls), info.mode == "json")


Traffic = Annotated[SerializeAsAny[TrafficSource], WrapValidator(_validate_traffic)]
