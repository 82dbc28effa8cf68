"""What-if over several hardware entries: calibrated estimates and the measured runs that match."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engine.whatif import explain
from engine.whatif.calibrate import Calibration, calibrate
from engine.whatif.estimate import Estimate, estimate
from engine.whatif.hardware import Hardware
from engine.whatif.points import Point, collect_points
from engine.whatif.recipe import EstimateRecipe, EstimateWorkload, resolve_dtypes
from engine.whatif.shapes import ModelShape

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from engine.whatif.fit import GroupFit
    from storage import Database


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
    statuses: dict[str, str] = field(default_factory=dict)  # hardware key -> calibration status in words
    reasons: dict[str, tuple[list[str], str]] = field(default_factory=dict)  # hardware key -> (lessons, figures)
    priors: dict[str, str] = field(default_factory=dict)  # hardware key -> where its uncalibrated factors come from
    # for an overhead-bound estimate: (hardware key, the recipe's name, its estimate, (lessons, figures)) of one that is not
    alternatives: list[tuple[str, str, Estimate, tuple[list[str], str]]] = field(default_factory=list)


BOUND_WORDS: dict[str, str] = {
    "compute": "compute-bound",
    "memory": "memory-bandwidth-bound",
    "overhead": "bound by the engine's per-step overhead",
}


def bound_words(prefill: str, decode: str) -> str:
    """``first token compute-bound; next tokens memory-bandwidth-bound`` (what limits each phase)."""
    return f"first token {BOUND_WORDS.get(prefill, prefill)}; next tokens {BOUND_WORDS.get(decode, decode)}"


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _band(group: GroupFit) -> str:
    """``±12 %``: the larger held-out median error of TTFT and TPOT; a note when one run gives none."""
    band = group.band
    if band is None:
        return "no held-out error yet (needs 2 runs)"
    return f"±{max(band.ttft_pct, band.tpot_pct):.0f} %"


def calibration_status(cal: Calibration, engine: str, hw: Hardware, weight: str, kv: str) -> str:
    """The calibration of one hardware entry in words.

    ``calibrated from 6 runs on this CPU, ±12 %``; ``data-sheet figures, factors from 6 runs on
    <device> (±12 %)``; ``data-sheet figures only, not calibrated``.
    """
    figures = "measured figures (micro-benchmark)" if hw.measured else "data-sheet figures"
    if engine == "ideal":
        return f"{figures}, bare roofline: not calibrated (a floor, not a forecast)"
    group, carried = cal.group_for(engine, hw.kind, weight, kv)
    if group is None:
        return f"{figures} only, not calibrated"
    other = f", carried from {group.recipe_label} to {weight}" if carried else ""
    if hw.measured and group.device_name == hw.name:
        return f"calibrated from {_runs(len(group.run_ids))} on this {hw.kind.upper()}, {_band(group)}{other}"
    return f"{figures}, factors from {_runs(len(group.run_ids))} on {group.device_name} ({_band(group)}){other}"


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


def _reason(e: Estimate, parts: explain.Parts, family: str = "") -> tuple[list[str], str]:
    return explain.lessons(e, family), explain.figures(e, parts)


def what_if(
    shape: ModelShape,
    source: str,
    hardware: list[Hardware],
    recipe: EstimateRecipe,
    workload: EstimateWorkload,
    db: Database | None = None,
    calibration: Calibration | None = None,
) -> WhatIf:
    """Calibrated estimates for each hardware entry plus the measured runs that match them."""
    cal = calibration if calibration is not None else calibrate(db)
    estimates, statuses, reasons, priors, others = [], {}, {}, {}, []
    for hw in hardware:
        weight, kv = resolve_dtypes(recipe, hw)
        factors, band, label = cal.for_target(recipe.engine, hw.kind, weight, kv)
        found = estimate(shape, hw, recipe, workload, factors, label, band)
        estimates.append(found)
        statuses[hw.key] = calibration_status(cal, recipe.engine, hw, weight, kv)
        reasons[hw.key] = _reason(found, explain.parts(shape, hw, recipe, workload, found.factors), recipe.engine)
        priors[hw.key] = explain.priors_source(recipe.engine, hw.kind)
        other = explain.alternative(shape, hw, recipe, workload, found)
        if other is not None:
            name, alt = other
            others.append((hw.key, name, alt, _reason(alt, explain.parts(shape, hw, recipe, workload, alt.factors))))
    points = cal.points if cal.points or db is None else collect_points(db)[0]
    keys = {e.hardware for e in estimates}
    measured = [
        Measured(p.run_id, p.hardware.key, p.ttft_ms, p.tpot_ms)
        for p in points
        if p.hardware.key in keys and matches(p, source, recipe, workload)
    ]
    return WhatIf(estimates, measured, cal, statuses, reasons, priors, others)


def _row(e: Estimate, meas: list[Measured]) -> JSONObject:
    """One estimate as a flat row (module :func:`table_rows`)."""
    gb, band = 1e9, e.band
    return {
        "hardware": e.hardware,
        "name": e.hardware_name,
        "fits": e.fits,
        "fit": e.no_fit or "fits",
        "memory_gb": e.memory.total / gb,
        "usable_gb": e.memory.usable / gb,
        "weights_gb": e.memory.weights / gb,
        "kv_gb": e.memory.kv_total / gb,
        "kv_per_token_kb": e.memory.kv_per_token / 1024,
        "activations_gb": e.memory.activations / gb,
        "overhead_gb": e.memory.overhead / gb,
        "ttft_ms": e.ttft_ms if e.fits else None,
        "tpot_ms": e.tpot_ms if e.fits else None,
        "output_tokens_per_s": e.output_tokens_per_s if e.fits else None,
        "max_batch": e.max_batch,
        "max_context": e.max_context,
        "bound": f"{e.prefill_bound}/{e.decode_bound}",
        "bound_words": bound_words(e.prefill_bound, e.decode_bound),
        "precision": f"{e.weight_dtype} w, {e.kv_dtype} kv, {e.compute_precision} math",
        "band_ttft_pct": None if band is None else band.ttft_pct,
        "band_tpot_pct": None if band is None else band.tpot_pct,
        "measured_ttft_ms": float(np.median([m.ttft_ms for m in meas])) if meas else None,
        "measured_tpot_ms": float(np.median([m.tpot_ms for m in meas])) if meas else None,
        "measured_runs": [m.run_id for m in meas],
        "calibration": e.calibration,
        "notes": "; ".join(e.notes),
    }


def table_rows(w: WhatIf) -> list[JSONObject]:
    """One flat row per hardware entry: the table the CLI prints and the page shows.

    An entry that does not fit has no TTFT, TPOT or throughput (None), and ``fit`` says why
    and what would fit; ``bound_words``, ``lessons`` (each phase's bound and what would change it), ``figures``
    (what each phase's time is made of) and
    ``calibration_status`` say the same in words, ``priors`` where uncalibrated factors come from.
    """
    rows = []
    for e in w.estimates:
        row = _row(e, [m for m in w.measured if m.hardware == e.hardware])
        row.update(
            calibration_status=w.statuses.get(e.hardware, ""),
            lessons=w.reasons.get(e.hardware, ([], ""))[0],
            figures=w.reasons.get(e.hardware, ([], ""))[1],
            priors=w.priors.get(e.hardware, ""),
        )
        rows.append(row)
    return rows


def comparison_rows(w: WhatIf) -> list[JSONObject]:
    """The same rows for the recipe that is not overhead-bound, beside each overhead-bound estimate (``recipe``
    names it, ``lessons`` and ``figures`` say its bound): the difference the engine makes, visible."""
    return [
        dict(_row(alt, []), recipe=name, lessons=why[0], figures=why[1], calibration_status=alt.calibration)
        for _hw, name, alt, why in w.alternatives
    ]
