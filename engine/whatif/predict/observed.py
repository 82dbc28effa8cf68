"""A stored measured run as a calibration sees it: its spec, the hardware it ran on, its measured requests in
plan order and what the server said about itself.

Only runs a serving simulation can be compared with are taken: done, measured (never a predicted run),
on one device with a micro-benchmark of it (``python -m engine calibrate``: the hardware entry a
simulation of it uses, ``local:cpu`` for this machine's CPU), of an engine the simulator models, with
one measured phase (repeats are left out: each repeat is another phase of the same plan), a spec that
still validates, and at least two requests with a first token. The others are returned with their
reason (categories, so they can be counted). The server's counters come from its scraped
``server_metrics`` record where the run has one (vLLM: steps and their tokens, preemptions, prefix-cache
hit rate); speculative decoding's acceptance from the run's provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.measure.records import RequestRecord
from engine.spec import JobSpec, SpecError, parse_job_spec
from engine.whatif.hardware import Hardware, from_measurement
from engine.whatif.predict.deployment import NotModelled, Terms, recipe_terms
from engine.whatif.shapes import EstimateError, ModelShape, model_shape

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping, JSONObject
    from storage import Database
    from storage.hardware import HardwareMeasurement
    from storage.runs import RunDetail


@dataclass(frozen=True, eq=False)
class Observed:
    """One measured run, reduced to what a calibration compares a simulation with."""

    run_id: int
    spec: JobSpec
    terms: Terms
    hardware: Hardware
    shape: ModelShape
    records: list[RequestRecord]  # the measured phase's requests, in plan order (index 0 first)
    metrics: JSONObject
    counters: dict[str, float] = field(default_factory=dict)  # steps, step_tokens, preemptions, prefix_hit_rate
    acceptance: float | None = None  # speculative decoding's measured acceptance rate
    applied: JSONObject = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name or f"run {self.run_id}"


def _last(fields: JSONMapping, name: str) -> float | None:
    values = [v for v in fields.get(name) or [] if isinstance(v, (int, float))]
    return float(values[-1]) if values else None


def server_counters(body: JSONMapping | None) -> dict[str, float]:
    """What a stored ``server_metrics`` record counted over the measured phase (only what it has)."""
    fields = (body or {}).get("fields") or {}
    out = {
        "steps": _last(fields, "iterations_total"),
        "step_tokens": _last(fields, "iteration_tokens_total"),
        "preemptions": _last(fields, "num_preemptions_total"),
        "prefix_hit_rate": _last(fields, "prefix_cache_hit_rate"),
    }
    return {k: v for k, v in out.items() if v is not None}


def _measured(requests: list[RequestRecord]) -> list[RequestRecord] | str:
    measured = sorted((r for r in requests if not r.warmup), key=lambda r: r.index)
    if any(r.trial for r in measured):
        return "repeated phases (one measured phase only)"
    if sum(1 for r in measured if r.chunk_ns) < 2:
        return "fewer than 2 requests with a first token"
    return measured


def _hardware(run: RunDetail, measurements: list[HardwareMeasurement]) -> Hardware | str:
    from engine.whatif.points import device_measurement

    found = device_measurement(run, measurements)
    return found if isinstance(found, str) else from_measurement(found)


def observed_of(db: Database, run: RunDetail, measurements: list[HardwareMeasurement]) -> Observed | str:
    """A stored run (a :class:`storage.runs.RunDetail`) as :class:`Observed`, or the reason it cannot be one."""
    from storage.runs import get_requests
    from storage.series import get_series

    if run.status != "done" or getattr(run, "predicted", False):
        return "not a done measured run"
    hardware = _hardware(run, measurements)
    if isinstance(hardware, str):
        return hardware
    try:
        spec = parse_job_spec(run.spec or {})
        terms = recipe_terms(spec.recipe.model_dump(), hardware.kind, (run.provenance or {}).get("applied"))
        shape = model_shape(spec.model.source)
    except (SpecError, NotModelled, EstimateError) as exc:
        return str(exc).split(":")[0] if isinstance(exc, SpecError) else str(exc)
    records = _measured(get_requests(db, run.id))
    if isinstance(records, str):
        return records
    prov = run.provenance or {}
    return Observed(
        run_id=run.id,
        spec=spec,
        terms=terms,
        hardware=hardware,
        shape=shape,
        records=records,
        metrics=run.metrics or {},
        counters=server_counters(get_series(db, run.id, "server_metrics")),
        acceptance=(prov.get("spec_decode") or {}).get("acceptance_rate"),
        applied=prov.get("applied") or {},
    )


def collect_observed(
    db: Database, family: str | None = None, run_ids: list[int] | None = None, limit: int = 500
) -> tuple[list[Observed], list[tuple[int, str]]]:
    """Measured runs a calibration may use (of one what-if ``family``, or the ``run_ids`` given), and (run id,
    reason) for the others."""
    from storage.hardware import list_measurements
    from storage.runs import get_runs, list_runs

    measurements = list_measurements(db, limit=500)
    if run_ids is None:
        run_ids = [r.id for r in list_runs(db, limit=limit, status="done", predicted=False)]
    found, skipped = [], []
    for run in get_runs(db, run_ids):
        got = observed_of(db, run, measurements)
        if isinstance(got, str):
            skipped.append((run.id, got))
        elif family is None or got.terms.family == family:
            found.append(got)
    return found, skipped
