"""What-if over several hardware entries: calibrated estimates and the measured runs that match."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.whatif.calibrate import Calibration, calibrate
from engine.whatif.estimate import Estimate, estimate
from engine.whatif.hardware import Hardware
from engine.whatif.points import Point, collect_points
from engine.whatif.recipe import EstimateRecipe, EstimateWorkload, resolve_dtypes
from engine.whatif.shapes import ModelShape


@dataclass(frozen=True)
class Measured:
    """A stored run that matches the what-if question, to overlay on its device's estimate."""

    run_id: int
    hardware: str
    ttft_ms: float
    tpot_ms: float


@dataclass(frozen=True)
class WhatIf:
    """Estimates for several hardware entries, and the measured runs that match."""

    estimates: list[Estimate]
    measured: list[Measured]
    calibration: Calibration


def matches(p: Point, source: str, recipe: EstimateRecipe, workload: EstimateWorkload) -> bool:
    """Whether a measured point is the estimate's question: same model, recipe and workload.

    Only admitted (modelled) runs are points; among them the model, engine, weight and KV
    precision, dropped layers, batch size, prompt and output lengths must agree, and the
    estimate's concurrency must be one batch (what a static-batch run measures).
    """
    weight, kv = resolve_dtypes(recipe, p.hardware)
    return (
        p.source == source
        and p.engine == recipe.engine
        and (p.dtype, p.kv or kv) == (weight, kv)
        and p.drop_layers == recipe.drop_layers
        and p.batch_size == recipe.batch_size
        and (p.prompt_tokens, p.output_tokens) == (workload.prompt_tokens, workload.output_tokens)
        and workload.concurrency in (None, recipe.batch_size)
        and recipe.tp == 1
    )


def what_if(
    shape: ModelShape,
    source: str,
    hardware: list[Hardware],
    recipe: EstimateRecipe,
    workload: EstimateWorkload,
    db: Any | None = None,
    calibration: Calibration | None = None,
) -> WhatIf:
    """Calibrated estimates for each hardware entry plus the measured runs that match them."""
    cal = calibration if calibration is not None else calibrate(db)
    estimates = []
    for hw in hardware:
        weight, kv = resolve_dtypes(recipe, hw)
        factors, band, label = cal.for_target(recipe.engine, hw.kind, weight, kv)
        estimates.append(estimate(shape, hw, recipe, workload, factors, label, band))
    points = cal.points if cal.points or db is None else collect_points(db)[0]
    keys = {e.hardware for e in estimates}
    measured = [
        Measured(p.run_id, p.hardware.key, p.ttft_ms, p.tpot_ms)
        for p in points
        if p.hardware.key in keys and matches(p, source, recipe, workload)
    ]
    return WhatIf(estimates=estimates, measured=measured, calibration=cal)


def table_rows(w: WhatIf) -> list[dict[str, Any]]:
    """One flat row per hardware entry: the table the CLI prints and the page shows."""
    gb = 1e9
    rows = []
    for e in w.estimates:
        meas = [m for m in w.measured if m.hardware == e.hardware]
        band = e.band
        rows.append(
            {
                "hardware": e.hardware,
                "name": e.hardware_name,
                "fits": e.fits,
                "memory_gb": e.memory.total / gb,
                "usable_gb": e.memory.usable / gb,
                "weights_gb": e.memory.weights / gb,
                "kv_gb": e.memory.kv_total / gb,
                "kv_per_token_kb": e.memory.kv_per_token / 1024,
                "activations_gb": e.memory.activations / gb,
                "overhead_gb": e.memory.overhead / gb,
                "ttft_ms": e.ttft_ms,
                "tpot_ms": e.tpot_ms,
                "output_tokens_per_s": e.output_tokens_per_s,
                "max_batch": e.max_batch,
                "max_context": e.max_context,
                "bound": f"{e.prefill_bound}/{e.decode_bound}",
                "precision": f"{e.weight_dtype} w, {e.kv_dtype} kv, {e.compute_precision} math",
                "band_ttft_pct": None if band is None else band.ttft_pct,
                "band_tpot_pct": None if band is None else band.tpot_pct,
                "measured_ttft_ms": float(np.median([m.ttft_ms for m in meas])) if meas else None,
                "measured_tpot_ms": float(np.median([m.tpot_ms for m in meas])) if meas else None,
                "measured_runs": [m.run_id for m in meas],
                "calibration": e.calibration,
                "notes": "; ".join(e.notes),
            }
        )
    return rows
