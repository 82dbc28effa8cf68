"""Measured runs reduced to what the estimator needs (:class:`Point`), read from storage.

Only runs the estimator models become points (:func:`engine.whatif.admit.admit`); every
other finished run is returned with the reason it was left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.spec import engines
from engine.spec.workload import flat_workload
from engine.whatif.admit import RunRecipe, admit, nominal_prompt
from engine.whatif.hardware import Hardware, from_measurement
from engine.whatif.recipe import EstimateRecipe
from engine.whatif.roofline import Work, work
from engine.whatif.shapes import EstimateError, ModelShape, model_shape

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping
    from storage import Database
    from storage.hardware import HardwareMeasurement
    from storage.runs import RunDetail


@dataclass(frozen=True)
class Point:
    """One measured run, reduced to what the estimator needs."""

    run_id: int
    engine: str
    device: str
    device_kind: str
    dtype: str
    source: str
    shape: ModelShape
    prompt_tokens: int
    output_tokens: int
    batch_size: int
    ttft_ms: float
    tpot_ms: float
    hardware: Hardware
    kv: str = ""
    method: str = ""
    drop_layers: int = 0

    def recipe(self) -> EstimateRecipe:
        """The run's recipe as the estimator takes it."""
        return EstimateRecipe(
            engine=self.engine,
            dtype=self.dtype,
            kv_dtype=self.kv or "auto",
            batch_size=self.batch_size,
            drop_layers=self.drop_layers,
        )

    def work(self) -> Work:
        return work(self.shape, self.hardware, self.recipe(), self.prompt_tokens, self.output_tokens, self.batch_size)


def _latency(metrics: JSONMapping) -> tuple[float, float] | None:
    ttft = (metrics.get("ttft_ms") or {}).get("p50")
    tpot = (metrics.get("tpot_ms") or {}).get("p50")
    return (float(ttft), float(tpot)) if ttft and tpot else None


def device_measurement(run: RunDetail, measurements: list[HardwareMeasurement]) -> HardwareMeasurement | str:
    """The micro-benchmark of the run's device (same host first), or why there is none."""
    if "," in run.device:
        return "multi-device run: not used for calibration yet"
    host = (run.provenance or {}).get("host")
    same = [m for m in measurements if m.device == run.device]
    match = [m for m in same if m.host == host] or same
    if not match:
        return f"no micro-benchmark of {run.device} (run: python -m engine calibrate)"
    return match[0]


def point_of(run: RunDetail, measurements: list[HardwareMeasurement]) -> Point | str:
    """A stored run as a :class:`Point`, or the reason it cannot be one."""
    spec, prov = run.spec or {}, run.provenance or {}
    latency = _latency(run.metrics or {})
    if latency is None:
        return "no TTFT/TPOT (needs at least 2 output tokens)"
    measurement = device_measurement(run, measurements)
    if isinstance(measurement, str):
        return measurement
    hw = from_measurement(measurement)
    recipe = admit(spec, prov, hw.kind)
    if isinstance(recipe, str):
        return recipe
    source = (spec.get("model") or {}).get("source", run.model)
    try:
        shape = model_shape(source)
        shape.dropped(recipe.drop_layers)
    except EstimateError as exc:
        return str(exc)
    return _point(run, hw, source, shape, recipe, latency)


def _point(
    run: RunDetail, hw: Hardware, source: str, shape: ModelShape, recipe: RunRecipe, latency: tuple[float, float]
) -> Point:
    wl = flat_workload((run.spec or {}).get("workload"))
    descriptor = engines.find(run.engine)
    return Point(
        run_id=run.id,
        engine=descriptor.whatif.family if descriptor else run.engine,  # runs calibrate their what-if family
        device=run.device,
        device_kind=hw.kind,
        dtype=recipe.weight,
        source=source,
        shape=shape,
        prompt_tokens=int(nominal_prompt(wl) or 0),
        output_tokens=int(wl.get("output_tokens", 32)),
        batch_size=int(wl.get("batch_size", 1)),
        ttft_ms=latency[0],
        tpot_ms=latency[1],
        hardware=hw,
        kv=recipe.kv,
        method=recipe.method,
        drop_layers=recipe.drop_layers,
    )


def collect_points(db: Database, limit: int = 2000) -> tuple[list[Point], list[tuple[int, str]]]:
    """Measured runs usable for calibration, and (run id, reason) for the others."""
    from storage.hardware import list_measurements
    from storage.runs import get_run, list_runs

    measurements = list_measurements(db, limit=500)
    points: list[Point] = []
    skipped: list[tuple[int, str]] = []
    for summary in list_runs(db, limit=limit, status="done"):
        run = get_run(db, summary.id)
        if run is None:
            continue
        got = point_of(run, measurements)
        if isinstance(got, str):
            skipped.append((run.id, got))
        else:
            points.append(got)
    return points, skipped
