"""Measured runs reduced to what the estimator needs (:class:`Point`), read from storage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.whatif.hardware import Hardware, from_measurement
from engine.whatif.recipe import EstimateRecipe, normalize_dtype
from engine.whatif.roofline import Work, work
from engine.whatif.shapes import EstimateError, ModelShape, model_shape


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

    def work(self) -> Work:
        recipe = EstimateRecipe(engine=self.engine, dtype=self.dtype, batch_size=self.batch_size)
        return work(self.shape, self.hardware, recipe, self.prompt_tokens, self.output_tokens, self.batch_size)


def _dtype_of(spec: dict[str, Any], prov: dict[str, Any], device: str) -> str:
    applied = (prov.get("applied") or {}).get("dtype")
    name = applied or (spec.get("recipe") or {}).get("dtype") or "auto"
    if name == "auto":
        return "fp32" if device == "cpu" else "bf16"
    return normalize_dtype(str(name), ("fp32", "bf16", "fp16", "fp8", "int8", "int4"))


def collect_points(db: Any, limit: int = 2000) -> tuple[list[Point], list[tuple[int, str]]]:
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
        spec, prov, metrics = run.spec or {}, run.provenance or {}, run.metrics or {}
        wl = spec.get("workload") or {}
        ttft = (metrics.get("ttft_ms") or {}).get("p50")
        tpot = (metrics.get("tpot_ms") or {}).get("p50")
        if not ttft or not tpot:
            skipped.append((run.id, "no TTFT/TPOT (needs at least 2 output tokens)"))
            continue
        if not wl.get("prompt_tokens"):
            skipped.append((run.id, "prompt file workload: prompt length not fixed"))
            continue
        device = run.device.split(",")[0]
        if "," in run.device:
            skipped.append((run.id, "multi-device run: not used for calibration yet"))
            continue
        host = prov.get("host")
        match = [m for m in measurements if m.device == device and m.host == host] or [
            m for m in measurements if m.device == device
        ]
        if not match:
            skipped.append((run.id, f"no micro-benchmark of {device} (run: python -m engine calibrate)"))
            continue
        source = (spec.get("model") or {}).get("source", run.model)
        try:
            shape = model_shape(source)
            dtype = _dtype_of(spec, prov, device)
        except EstimateError as exc:
            skipped.append((run.id, str(exc)))
            continue
        hw = from_measurement(match[0])
        points.append(
            Point(
                run_id=run.id,
                engine=run.engine,
                device=device,
                device_kind=hw.kind,
                dtype=dtype,
                source=source,
                shape=shape,
                prompt_tokens=int(wl["prompt_tokens"]),
                output_tokens=int(wl.get("output_tokens", 32)),
                batch_size=int(wl.get("batch_size", 1)),
                ttft_ms=float(ttft),
                tpot_ms=float(tpot),
                hardware=hw,
            )
        )
    return points, skipped
