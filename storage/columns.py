"""A run's headline figures as SQL column values, so listings read columns instead of parsing JSON.

Which metrics get a column is the registry's (``Metric.stored_column``); besides them a run
keeps its request counts, its noise flags in words, whether it was measured under
contention, its recipe knobs and workload fields that differ from the defaults
(``knobs_json``, a few dozen bytes shared by the runs of one recipe) and its task scores
(``tasks_json``, NULL for runs without tasks). :func:`column_values` is used on save and by
the migration that back-fills older runs; :func:`expand_knobs` turns ``knobs_json`` back
into every knob's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from engine.measure import registry
from engine.measure.registry import finite
from storage.jsontext import dumps

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping, JSONObject, JSONValue

EXTRA_COLUMNS: tuple[str, ...] = ("completed", "failed", "noise", "contended", "knobs_json", "tasks_json")
ColumnValue = bool | int | float | str | None  # a headline column's value
Knobs = dict[str, "JSONObject"]  # {"recipe": {...}, "workload": {...}}: what differs from the defaults


def metric_columns() -> list[str]:
    """The SQL column names of the stored metrics, in registry order."""
    return [m.column for m in registry.stored_metrics()]


def _noise(metrics: JSONMapping) -> tuple[str | None, bool | None]:
    flags = metrics.get("noise_flags")  # engine/run/noise.py; None for runs from before it
    if not isinstance(flags, list):
        return None, None
    found = [f for f in flags if isinstance(f, dict)]
    return "; ".join(str(f.get("detail") or "") for f in found), any(f.get("kind") == "machine" for f in found)


def _count(value: JSONValue) -> int | None:
    number = finite(value)
    return None if number is None else int(number)


def column_values(
    spec: JSONValue, metrics: JSONValue, quality: JSONValue, engine: str | None = None
) -> dict[str, ColumnValue]:
    """Every headline column of one run from its parsed spec, metrics and quality dicts (any may be None)."""
    metrics = metrics if isinstance(metrics, dict) else {}
    quality = quality if isinstance(quality, dict) else {}
    accuracy = registry.accuracy_metrics(quality)
    out: dict[str, ColumnValue] = {m.column: m.value(metrics, quality) for m in registry.stored_metrics()}
    out["noise"], out["contended"] = _noise(metrics)
    out["completed"], out["failed"] = _count(metrics.get("completed")), _count(metrics.get("failed"))
    out["knobs_json"] = dumps(changed_fields(spec, engine), sort_keys=True, separators=(",", ":"))
    tasks: dict[str, float | str] = {k: v for k, v in accuracy.items() if k.startswith("quality.task:")}
    tasks.update({f"{k}:kind": v for k, v in registry.task_kinds(quality).items() if k in tasks})
    out["tasks_json"] = dumps(tasks, sort_keys=True) if tasks else None
    return out


# -- recipe knobs and workload fields that differ from the defaults ---------------------------
@lru_cache(maxsize=32)
def _class_defaults(cls: type) -> tuple[tuple[str, object], ...]:
    fields = cls.model_fields  # type: ignore[attr-defined]
    return tuple((n, f.get_default(call_default_factory=True)) for n, f in fields.items() if not f.is_required())


@lru_cache(maxsize=1)
def _workload_defaults() -> tuple[tuple[str, object], ...]:
    """The default workload's flat fields (:meth:`engine.spec.workload.Workload.flat`): what the stored knobs hold."""
    from engine.spec.workload import Workload

    return tuple(Workload().flat().items())


def _defaults(part: str, engine: str) -> tuple[tuple[str, object], ...]:
    """The defaults of the workload, or of the recipe class of a registered engine (its descriptor names it), as
    (field, value) pairs; none for an engine no longer registered."""
    from engine.spec import engines

    if part == "workload":
        return _workload_defaults()
    descriptor = engines.find(engine)
    return _class_defaults(descriptor.recipe) if descriptor else ()


def _as_json(value: object) -> object:
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def changed_fields(spec: JSONValue, engine: str | None = None) -> Knobs:
    """``{"recipe": {...}, "workload": {...}}``: the knobs and workload fields that differ from the defaults."""
    spec = spec if isinstance(spec, dict) else {}
    out: Knobs = {}
    for part in ("recipe", "workload"):
        section = spec.get(part)
        given: JSONObject = section if isinstance(section, dict) else {}
        if part == "workload":
            from engine.spec.workload import flat_workload

            given = flat_workload(given)  # flat, as knobs were stored before Workload.traffic
        name = str(given.get("engine") or engine or "") if part == "recipe" else ""
        defaults = {k: _as_json(v) for k, v in _defaults(part, name)}
        out[part] = {k: v for k, v in given.items() if k != "engine" and (k not in defaults or defaults[k] != v)}
    return out


def expand_knobs(knobs: Mapping[str, JSONMapping], engine: str | None) -> tuple[dict[str, object], dict[str, object]]:
    """(recipe, workload): every knob's value (a default as its field gives it), the defaults filled in around the
    stored changes (:data:`Knobs`)."""
    recipe = {k: _as_json(v) for k, v in _defaults("recipe", str(engine or "")) if k != "engine"}
    workload = {k: _as_json(v) for k, v in _defaults("workload", "")}
    recipe.update(knobs.get("recipe") or {})
    workload.update(knobs.get("workload") or {})
    return recipe, workload
