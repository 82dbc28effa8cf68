"""Sweep grids (pure): a base spec, one axis per swept field, one job spec per combination.

The Launch page sweeps any recipe or workload field (``field_axis``); ``python -m engine
sweep`` sweeps request rates or concurrencies (``rate_axis``, ``concurrency_axis``: each
point sets the arrival process with its value). Both build the grid with
:func:`build_grid` and validate it with :func:`grid_specs`.

A knob that only matters with another one (``gptq_bits`` with ``quantization=gptq``, see
:func:`engine.spec.engines.knob_dependencies`) is put back to its default on the points that
do not use it, unless it is swept itself: sweeping ``quantization`` over ``none, gptq``
with ``gptq_bits=8`` gives a plain ``none`` point (same fingerprint as any plain run), not
a refused one.

**Trials interleave across the grid.** A sweep whose workload asks for ``trials=k`` is
expanded into k rounds of one-trial jobs, round by round (A B C A B C ...), all in the
same sweep, so drift of the machine (heat, other jobs) hits every recipe alike; each job
is named ``<label>, trial i of k`` and keeps the fingerprint of a plain one-trial run of
its recipe, so the k runs of a recipe are found together. A sweep with adaptive stopping
(``until_ci_pct``) is not interleaved: the rounds of adaptive stopping must sit in one run
(the interval is taken over them), so each job keeps its trials as its first rounds.

**Loads.** :func:`load_of` reads a point's load (its axis and value) back from its spec, and
:func:`load_group` names the points that differ only in their load (and name): a sweep that
stops at saturation stops each group on its own, in increasing order of load.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine.jsonvalue import JSONObject, JSONValue
from engine.spec import engines
from engine.spec.base import SpecError
from engine.spec.job import JobSpec, parse_job_spec
from engine.spec.rules import unused_knobs
from engine.spec.workload import Workload

# What one point of an axis sets: section ("recipe", "workload", "quality") -> field -> value.
Overrides = dict[str, dict[str, JSONValue]]


@dataclass(frozen=True)
class Axis:
    """One swept dimension: a label and the fields it sets, per point."""

    points: tuple[tuple[str, Overrides], ...]

    def fields(self) -> set[tuple[str, str]]:
        """Every (section, field) this axis sets."""
        return {(section, name) for _, over in self.points for section, values in over.items() for name in values}


@dataclass(frozen=True)
class SweepPoint:
    """One combination: its label (``dtype=float32, batch_size=2``; empty without axes) and spec data."""

    label: str
    data: JSONObject

    def where(self, index: int, total: int) -> str:
        """``job 2 of 4 (dtype=float32): `` for messages about this point ('' without a sweep)."""
        return f"job {index + 1} of {total} ({self.label}): " if self.label else ""


def field_axis(section: str, field: str, values: Sequence[JSONValue]) -> Axis:
    """Every value of one field, labelled ``field=value``."""
    return Axis(tuple((f"{field}={value}", {section: {field: value}}) for value in values))


def rate_axis(rates: Sequence[float], arrival: str = "poisson") -> Axis:
    """Request rates per second with Poisson arrivals (gamma when the base is gamma); ``inf``: all at once."""
    points = []
    for rate in rates:
        if math.isinf(rate):
            points.append(
                (
                    load_label(("rate", rate)),
                    {"workload": {"arrival": "max", "rate": None, "burstiness": 1.0, "batch_size": 1}},
                )
            )
            continue
        wl: JSONObject = {"arrival": "gamma" if arrival == "gamma" else "poisson", "rate": rate, "batch_size": 1}
        if wl["arrival"] == "poisson":
            wl["burstiness"] = 1.0
        points.append((load_label(("rate", rate)), {"workload": wl}))
    return Axis(tuple(points))


def concurrency_axis(concurrencies: Sequence[int]) -> Axis:
    """Most requests in flight, one point each (arrival ``concurrency``)."""
    return Axis(
        tuple(
            (
                load_label(("concurrency", int(n))),
                {
                    "workload": {
                        "arrival": "concurrency",
                        "max_concurrency": int(n),
                        "rate": None,
                        "burstiness": 1.0,
                        "batch_size": 1,
                    }
                },
            )
            for n in concurrencies
        )
    )


# The workload fields a load axis sets (rate_axis, concurrency_axis).
LOAD_FIELDS: tuple[str, ...] = ("arrival", "rate", "max_concurrency", "burstiness", "batch_size")


def load_of(data: JSONObject) -> tuple[str, float] | None:
    """A spec's load as (``"rate"`` | ``"concurrency"``, value): requests/s (inf: all at once) or
    requests in flight; None for static batches or a spec without one."""
    workload = data.get("workload") or {}
    arrival = workload.get("arrival", "batch")
    if arrival == "max":
        return "rate", math.inf
    if arrival in ("poisson", "gamma") and workload.get("rate"):
        return "rate", float(workload["rate"])
    if arrival == "concurrency" and workload.get("max_concurrency"):
        return "concurrency", float(workload["max_concurrency"])
    return None


def load_group(data: JSONObject) -> str:
    """What the points of one load curve share: the spec without its load fields and name (canonical)."""
    rest = {k: v for k, v in data.items() if k != "name"}
    rest["workload"] = {k: v for k, v in (data.get("workload") or {}).items() if k not in LOAD_FIELDS}
    return json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str)


def load_label(load: tuple[str, float]) -> str:
    """A load axis's point label: ``rate 8/s``, ``max rate``, ``concurrency 16``."""
    kind, value = load
    if kind == "concurrency":
        return f"concurrency {int(value)}"
    return "max rate" if math.isinf(value) else f"rate {value:g}/s"


def load_words(load: tuple[str, float] | None) -> str:
    """``8 req/s``, ``as fast as possible``, ``concurrency 16`` (``?`` without a load)."""
    if load is None:
        return "?"
    kind, value = load
    if kind == "concurrency":
        return f"concurrency {value:g}"
    return "as fast as possible" if math.isinf(value) else f"{value:g} req/s"


def grid_size(axes: Sequence[Axis]) -> int:
    """How many job specs the axes make (1 without axes)."""
    return math.prod(len(axis.points) for axis in axes)


def build_grid(base: JobSpec | JSONObject, axes: Sequence[Axis]) -> list[SweepPoint]:
    """One point per combination of the axes' values, in order (the first axis varies slowest)."""
    data = base.model_dump(mode="json") if isinstance(base, JobSpec) else base
    if not axes:
        return [SweepPoint("", _copy(data))]
    swept = set().union(*(axis.fields() for axis in axes))
    out = []
    for combo in itertools.product(*(axis.points for axis in axes)):
        spec = _copy(data)
        for _, overrides in combo:
            for section, values in overrides.items():
                spec[section] = {**(spec.get(section) or {}), **values}
        _reset_unused(spec, swept)
        out.append(SweepPoint(", ".join(label for label, _ in combo), spec))
    return interleave_repeats(out)


def interleave_repeats(points: list[SweepPoint]) -> list[SweepPoint]:
    """Each point's ``trials`` as that many one-trial jobs, in rounds across the points (A B C A B C ...).

    Points with adaptive stopping (``until_ci_pct``), or a malformed ``trials``, are left as they are.
    """
    counts = []
    for point in points:
        workload = point.data.get("workload") or {}
        k = workload.get("trials", 1)
        interleave = isinstance(k, int) and k > 1 and workload.get("until_ci_pct") is None
        counts.append(k if interleave else 0)
    if not any(counts):
        return points
    out = []
    for r in range(max(counts)):
        for point, k in zip(points, counts, strict=True):
            if k == 0:
                if r == 0:
                    out.append(point)
                continue
            if r >= k:
                continue
            label = ", ".join(p for p in (point.label, f"trial {r + 1} of {k}") if p)
            data = _copy(point.data)
            data["workload"]["trials"] = 1
            data["name"] = f"{data['name']} ({label})" if data.get("name") else label
            out.append(SweepPoint(label, data))
    return out


def grid_specs(points: Sequence[SweepPoint]) -> list[JobSpec]:
    """Validate every point; SpecError naming the first point that cannot run."""
    specs = []
    for i, point in enumerate(points):
        try:
            specs.append(parse_job_spec(point.data))
        except SpecError as exc:
            raise SpecError(f"{point.where(i, len(points))}{exc}") from exc
    return specs


def _copy(data: JSONObject) -> JSONObject:
    return {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}


def _reset_unused(spec: JSONObject, swept: set[tuple[str, str]]) -> None:
    """Put knobs this point does not use back to their defaults (unless swept: validation then says why)."""
    recipe = spec.get("recipe") or {}
    engine = recipe.get("engine", engines.default().name)
    descriptor = engines.find(engine)
    for section, name, cls in (
        ("workload", "workload", Workload),
        ("recipe", engine, descriptor and descriptor.recipe),
    ):
        values = spec.get(section)
        if cls is None or not isinstance(values, dict):
            continue
        defaults = cls.field_defaults()
        try:
            unused = unused_knobs(engines.knob_dependencies(name), {**defaults, **values})
        except (TypeError, KeyError):  # a malformed value: validation will name it
            continue
        for knob, _ in unused:
            if knob in values and (section, knob) not in swept:
                values[knob] = defaults[knob]
