"""Pure what-if estimator: latency, throughput and memory fit of a recipe on hardware.

No weights, no torch, no device: the model is its architecture config. The time model
is a roofline with efficiency factors and fixed engine overheads (see :class:`Factors`):

- prefill (TTFT): the roofline time of one pass (FLOPs or bytes) and the prefill
  overhead, overlapping on a GPU (max of the two), added on a CPU;
- decode (TPOT) = per-step overhead + the roofline time of one step (weights plus the
  batch's KV cache read once) + tensor-parallel communication.

The model is written out in :mod:`engine.whatif.roofline`, memory in
:mod:`engine.whatif.memory`, model shapes (with dropped layers) in :mod:`engine.whatif.shapes`.
The per-step overhead is what keeps a launch-bound engine (eager transformers, one
kernel launch per op from Python) from being predicted as fast as a fused one.
:mod:`engine.whatif.calibrate` fits the factors from measured runs; without runs the
documented priors (:data:`engine.whatif.roofline.PRIORS`; the transformers GPU ones measured on an H200,
``engine/whatif/priors_h200.json``) are used and the estimate says "uncalibrated"; :mod:`engine.whatif.explain`
says what bounds it, in words.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from engine.whatif.hardware import Hardware
from engine.whatif.memory import (
    MEMORY_HEADROOM,
    RUNTIME_OVERHEAD_GB,
    Memory,
    kv_bytes_per_token_per_gpu,
    largest_fit,
    memory,
    no_fit_text,
    weights_bytes,
)
from engine.whatif.recipe import (
    ALIASES,
    BYTES,
    COMPUTE_PRECISION,
    KV_DTYPES,
    WEIGHT_DTYPES,
    EstimateRecipe,
    EstimateWorkload,
    normalize_dtype,
    resolve_dtypes,
)
from engine.whatif.roofline import ENGINES, PRIORS, Factors, Work, phase_times, prior, work
from engine.whatif.shapes import EstimateError, ModelShape, model_shape, shape_from_config

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject

__all__ = [
    "ALIASES",
    "BYTES",
    "COMPUTE_PRECISION",
    "ENGINES",
    "GB",
    "KV_DTYPES",
    "MEMORY_HEADROOM",
    "PRIORS",
    "RUNTIME_OVERHEAD_GB",
    "WEIGHT_DTYPES",
    "Band",
    "Estimate",
    "EstimateError",
    "EstimateRecipe",
    "EstimateWorkload",
    "Factors",
    "Memory",
    "ModelShape",
    "Work",
    "estimate",
    "kv_bytes_per_token_per_gpu",
    "largest_fit",
    "memory",
    "model_shape",
    "normalize_dtype",
    "phase_times",
    "prior",
    "resolve_dtypes",
    "shape_from_config",
    "weights_bytes",
    "work",
]

GB = 1e9


@dataclass(frozen=True)
class Band:
    """Error band from leave-one-out predictions of measured runs (relative, in %)."""

    ttft_pct: float
    tpot_pct: float
    ttft_p90_pct: float
    tpot_p90_pct: float
    n_runs: int


@dataclass(frozen=True)
class Estimate:
    """One hardware entry's prediction for a model, recipe and workload."""

    hardware: str
    hardware_name: str
    measured_hardware: bool
    weight_dtype: str
    kv_dtype: str
    compute_precision: str
    ttft_ms: float
    tpot_ms: float
    e2el_ms: float
    output_tokens_per_s: float
    tokens_per_s_per_user: float
    prefill_bound: str
    decode_bound: str
    memory: Memory
    max_batch: int
    max_context: int
    factors: Factors
    calibration: str
    band: Band | None = None
    notes: list[str] = field(default_factory=list)
    no_fit: str | None = None  # "does not fit: needs 141 GB, 76 GB usable — try tensor parallel 2 or int8"

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def to_dict(self) -> JSONObject:
        d = {k: v for k, v in asdict(self).items() if k not in ("memory", "factors", "band")}
        d["memory_bytes"] = self.memory.to_dict()
        d["fits"] = self.fits
        d["factors"] = self.factors.to_dict()
        d["band"] = None if self.band is None else asdict(self.band)
        return d


def estimate(
    shape: ModelShape,
    hw: Hardware,
    recipe: EstimateRecipe,
    workload: EstimateWorkload,
    factors: Factors | None = None,
    calibration: str = "uncalibrated",
    band: Band | None = None,
) -> Estimate:
    """Predict TTFT, TPOT, throughput and memory of one recipe on one hardware entry."""
    f = factors or prior(recipe.engine, hw.kind)
    p, o, b = workload.prompt_tokens, workload.output_tokens, recipe.batch_size
    notes: list[str] = []
    if shape.max_positions and p + o > shape.max_positions:
        notes.append(f"prompt + output ({p + o}) exceed the model's context of {shape.max_positions}")
    weight, kv = resolve_dtypes(recipe, hw)
    conc = workload.concurrency or b
    running = min(conc, b)
    w = work(shape, hw, recipe, p, o, running)
    if w.compute_precision != COMPUTE_PRECISION[weight]:
        notes.append(f"{hw.name} has no {COMPUTE_PRECISION[weight]} path; assumed {w.compute_precision} compute")
    ttft_s, tpot_s, bound_p, bound_d = phase_times(w, f)
    e2el_s = ttft_s + (o - 1) * tpot_s
    waves = math.ceil(conc / b)
    wait_s = e2el_s * (waves - 1) / 2  # static batches: a request waits for the batches before it
    mem = memory(shape, hw, recipe, p, o)
    max_batch, max_ctx = largest_fit(shape, hw, recipe, p, o)
    no_fit = no_fit_text(shape, hw, recipe, p, o)
    if no_fit:
        notes.append(no_fit)
    return Estimate(
        hardware=hw.key,
        hardware_name=hw.name,
        measured_hardware=hw.measured,
        weight_dtype=weight,
        kv_dtype=kv,
        compute_precision=w.compute_precision,
        ttft_ms=(ttft_s + wait_s) * 1e3,
        tpot_ms=tpot_s * 1e3,
        e2el_ms=(e2el_s + wait_s) * 1e3,
        output_tokens_per_s=conc * o / (waves * e2el_s),
        tokens_per_s_per_user=1 / tpot_s,
        prefill_bound=bound_p,
        decode_bound=bound_d,
        memory=mem,
        max_batch=max_batch,
        max_context=max_ctx,
        factors=f,
        calibration=calibration,
        band=band,
        notes=notes,
        no_fit=no_fit,
    )
