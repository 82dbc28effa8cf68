"""Flat traffic fields read into ``Workload.traffic`` (pure): the one place that decides a source from fields.

Two flat forms exist: specs stored before ``Workload.traffic`` (every traffic field beside the
workload's others, ``{"trace": "t.jsonl", "time_scale": 20, "prompt_tokens": null, ...}``) and
the command line's and sweeps' overrides (``--trace t.jsonl``, ``prompt_tokens=256``). A flat
field at its old default (:data:`~engine.spec.sources.base.LEGACY_FLAT_DEFAULTS`) says nothing.
The source is ``source`` where given; else the one whose :attr:`selected_by` fields are all set
(the most specific: ``dataset`` and ``multi_turn`` name sessions, ``dataset`` alone a dataset),
among those that read every field given, else the default source (synthetic lengths). A source
that declares no naming fields is named by ``source`` only. Fields that name two sources, or that the source does not
read, are refused in one line: nothing is dropped silently.
"""

from __future__ import annotations

from engine.jsonvalue import JSONMapping, JSONObject
from engine.spec.sources import all_sources as _all
from engine.spec.sources import find, name_of, names, unknown_source
from engine.spec.sources.base import LEGACY_FLAT_DEFAULTS, TrafficSource


def _said(flat: JSONMapping) -> JSONObject:
    """The flat fields that say something: set, and not at their old default."""
    return {
        k: v
        for k, v in flat.items()
        if k != "source" and v is not None and not (k in LEGACY_FLAT_DEFAULTS and v == LEGACY_FLAT_DEFAULTS[k])
    }


def _named(said: JSONMapping) -> list[type[TrafficSource]]:
    """The sources whose naming fields are all set, the most specific ones; a source that declares none is named
    by ``source`` alone, but for the default source (the first registered), which flat fields name by default."""
    default = _all()[0]
    found = [c for c in _all() if (c.selected_by or c is default) and all(said.get(k) for k in c.selected_by)]
    most = max((len(c.selected_by) for c in found), default=0)
    return [c for c in found if len(c.selected_by) == most]


def _not_read(cls: type[TrafficSource], said: JSONMapping) -> list[str]:
    return sorted(k for k in said if k not in cls.flat_names())


def _refusal(cls: type[TrafficSource], unread: list[str]) -> str:
    what = f"{', '.join(unread)} {'is not an option' if len(unread) == 1 else 'are not options'}"
    options = ", ".join(cls.option_names()) or "none"
    return f"{what} of the {cls.label} source ({name_of(cls)}: its options are {options})"


def source_of(flat: JSONMapping) -> type[TrafficSource]:
    """The source flat fields name (module doc); ValueError in one line when they name none or two."""
    said = _said(flat)
    if flat.get("source") is not None:
        cls = find(flat["source"])
        if cls is None:
            raise ValueError(unknown_source(flat["source"]))
        return cls
    candidates = _named(said)
    if len(candidates) > 1:
        candidates = [c for c in candidates if not _not_read(c, said)] or candidates
    if len(candidates) > 1:
        fields = sorted({k for c in candidates for k in c.selected_by if k in said})
        listed = ", ".join(f"{k} ({c.label})" for c in candidates for k in c.selected_by[:1])
        raise ValueError(f"{' and '.join(fields)} name different request sources ({listed}); give one source")
    return candidates[0]


def from_flat(flat: JSONMapping) -> JSONObject:
    """The traffic section flat fields describe (``{"source": ..., options}``); ValueError in one line."""
    cls = source_of(flat)
    said = _said(flat)
    unread = _not_read(cls, said)
    if unread:
        raise ValueError(_refusal(cls, unread))
    return {"source": name_of(cls), **{k: v for k, v in flat.items() if k in cls.option_names() and v is not None}}


def merged(traffic: TrafficSource | JSONMapping, flat: JSONMapping) -> JSONObject:
    """``traffic`` with flat overrides (the command line's on a spec file, a sweep point's): its own options are
    set whatever their value; fields that name another source replace it with that source (every option of the
    new one from ``flat``); anything else it does not read is refused in one line."""
    current = traffic.model_dump() if isinstance(traffic, TrafficSource) else dict(traffic)
    cls = find(current.get("source"))
    if cls is None:
        raise ValueError(unknown_source(current.get("source")) if current.get("source") else _no_source())
    said = _said(flat)
    other = flat.get("source") not in (None, name_of(cls)) or any(
        c is not cls and c.selected_by and not _not_read(c, said) for c in _named(said)
    )
    if other:
        return from_flat(flat)
    unread = _not_read(cls, {k: v for k, v in said.items() if k not in cls.option_names()})
    if unread:
        raise ValueError(_refusal(cls, unread))
    return {**current, **{k: v for k, v in flat.items() if k in cls.option_names()}}


def _no_source() -> str:
    return f"give the source: one of {', '.join(names())}"


def stored_traffic(flat: JSONMapping) -> TrafficSource | None:
    """The traffic of a stored run's flat workload (:func:`engine.spec.workload.flat_workload`), unvalidated (it was
    valid when stored), for readers of many stored specs; None when its fields name no one source."""
    try:
        cls = source_of(flat)
    except ValueError:
        return None
    return cls.model_construct(**{k: flat[k] for k in cls.option_names() if flat.get(k) is not None})
