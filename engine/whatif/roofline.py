"""The estimator's time model: engine factors, the work of a phase, and phase times.

- prefill (TTFT) = max(FLOPs / (peak x eff_compute_prefill), bytes / (bandwidth x
  eff_bandwidth)) combined with the prefill overhead, + tensor-parallel communication.
  On a GPU the host launches kernels asynchronously, so one prefill pass costs
  max(overhead, roofline): its launch time hides behind the kernels it launches (or
  they behind it). On a CPU the overhead is host work on the same cores: it adds.
- decode (TPOT) = per-step overhead + max(bytes / (bandwidth x eff_bandwidth),
  FLOPs / (peak x eff_compute_decode)) + communication, where bytes per step are all
  the weights plus the KV cache of the batch read once. An eager decode step also pays
  the generation loop's per-token host work (sampling, stopping checks, cache update)
  while the device waits, so the step overhead adds on both device kinds.

FIELD-NOTES (H200, eager transformers, batch 1, 512-token prompt; the runs are in
``engine/whatif/priors_h200.json``) shows why prefill must not pay the decode step overhead the
same way: measured TTFT (27 ms for Llama-3.2-1B, 24 ms for Llama-3-8B, whose prefill is ~6x the
FLOPs) is below TPOT (51 and 59 ms). :mod:`engine.whatif.explain` says which term bounds an
estimate, in words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.spec import engines
from engine.whatif.hardware import Hardware
from engine.whatif.memory import kv_bytes_per_token_per_gpu, weights_bytes
from engine.whatif.recipe import BYTES, COMPUTE_PRECISION, EstimateRecipe, resolve_dtypes
from engine.whatif.shapes import EstimateError, ModelShape

GB = 1e9
INTERCONNECT_EFFICIENCY = 0.7
ALLREDUCE_LATENCY_S = 5e-6


@dataclass(frozen=True)
class Factors:
    """Efficiency factors (shares of peak) and fixed overheads of an engine on a device kind."""

    eff_bandwidth: float
    eff_compute_prefill: float
    eff_compute_decode: float
    step_overhead_ms: float
    prefill_overhead_ms: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


IDEAL = "ideal"  # the bare roofline: data-sheet peaks, no overhead


def _priors() -> dict[tuple[str, str], Factors]:
    """(what-if family, device kind) -> the family's documented priors, as its engine's descriptor gives them."""
    out = {
        (d.whatif.family, kind): Factors(**factors)
        for d in engines.all_engines()
        for kind, factors in d.whatif.priors.items()
    }
    return {**out, (IDEAL, "gpu"): Factors(1.0, 1.0, 1.0, 0.0, 0.0), (IDEAL, "cpu"): Factors(1.0, 1.0, 1.0, 0.0, 0.0)}


# Priors, used until calibration replaces them ("uncalibrated"): each engine's descriptor gives its
# family's (``WhatIf.priors``); "ideal" is the bare roofline. The transformers family's GPU priors are the
# project's H200 runs, shipped with their source and date in engine/whatif/priors_h200.json; every estimate
# names where its priors come from (engine.whatif.explain.priors_source).
PRIORS: dict[tuple[str, str], Factors] = _priors()
# The estimator's engines: the what-if families with priors, then the bare roofline.
ENGINES: tuple[str, ...] = tuple(dict.fromkeys(family for family, _ in PRIORS))


def prior(engine: str, kind: str) -> Factors:
    """The documented prior of a what-if family (an estimator engine) on a device kind; EstimateError if it has none."""
    found = PRIORS.get((engine, kind))
    if found is None:
        raise EstimateError(
            f"no what-if model for engine {engine!r} on {kind}; the estimator knows {', '.join(ENGINES)}"
        )
    return found


@dataclass(frozen=True)
class Work:
    """FLOPs and bytes per GPU for one prefill and one decode step of a batch."""

    prefill_flops: float
    prefill_bytes: float
    decode_flops: float
    decode_bytes: float
    prefill_comm_s: float
    decode_comm_s: float
    peak_flops: float
    bandwidth: float
    compute_precision: str
    host_overlaps: bool = False  # GPU: asynchronous launches overlap the prefill's kernels


def _allreduce_s(n_bytes: float, tp: int, hw: Hardware) -> float:
    if tp == 1:
        return 0.0
    link = (hw.interconnect_gbs or 0) * GB * INTERCONNECT_EFFICIENCY
    return 2 * (tp - 1) / tp * n_bytes / link + 2 * (tp - 1) * ALLREDUCE_LATENCY_S


def work(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int, batch: int) -> Work:
    """The FLOPs and bytes of prefill and of an average decode step (context = prompt + output/2)."""
    shape = shape.dropped(recipe.drop_layers)
    weight, kv = resolve_dtypes(recipe, hw)
    if recipe.tp > 1 and not hw.interconnect_gbs:
        raise EstimateError(f"{hw.name} has no interconnect figure; tensor parallelism needs one (use tp=1)")
    if recipe.tp > 1 and shape.heads % recipe.tp:
        raise EstimateError(f"{shape.name} has {shape.heads} attention heads, not divisible by tp={recipe.tp}")
    tp = recipe.tp
    peak, used = hw.peak_flops(COMPUTE_PRECISION[weight])
    act_bytes = 4 if weight == "fp32" else 2
    weight_bytes = weights_bytes(shape, weight)
    # The embedding table is only gathered (B rows) unless it is also the output projection.
    streamed_weights = weight_bytes - (0 if shape.tied_embeddings else shape.embed_params * BYTES[weight])
    kv_tok = kv_bytes_per_token_per_gpu(shape, kv, tp)
    attn_dim = shape.heads * shape.head_dim
    window = shape.sliding_window

    p_ctx = min(prompt, window) if window else prompt
    prefill_flops = (
        2 * shape.linear_params * batch * prompt
        + 4 * shape.layers * batch * attn_dim * prompt * (p_ctx + 1) / 2
        + 2 * shape.lm_head_params * batch
    ) / tp
    prefill_bytes = streamed_weights / tp + batch * prompt * kv_tok

    ctx = prompt + output / 2
    d_ctx = min(ctx, window) if window else ctx
    decode_flops = (
        2 * (shape.linear_params + shape.lm_head_params) * batch + 4 * shape.layers * batch * attn_dim * d_ctx
    ) / tp
    decode_bytes = streamed_weights / tp + batch * d_ctx * kv_tok
    per_layer = 2 * shape.layers  # all-reduces after attention and after the MLP
    prefill_comm = per_layer * _allreduce_s(batch * prompt * shape.hidden * act_bytes, tp, hw)
    decode_comm = per_layer * _allreduce_s(batch * shape.hidden * act_bytes, tp, hw)
    return Work(
        prefill_flops,
        prefill_bytes,
        decode_flops,
        decode_bytes,
        prefill_comm,
        decode_comm,
        peak,
        hw.bandwidth_bytes_per_s,
        used,
        host_overlaps=hw.kind == "gpu",
    )


def phase_times(w: Work, f: Factors) -> tuple[float, float, str, str]:
    """(TTFT s, TPOT s, prefill bound, decode bound) of ``w`` under factors ``f``."""
    p_compute = w.prefill_flops / (w.peak_flops * f.eff_compute_prefill)
    p_memory = w.prefill_bytes / (w.bandwidth * f.eff_bandwidth)
    d_memory = w.decode_bytes / (w.bandwidth * f.eff_bandwidth)
    d_compute = w.decode_flops / (w.peak_flops * f.eff_compute_decode)
    p_overhead, p_roof = f.prefill_overhead_ms / 1e3, max(p_compute, p_memory)
    p_time = max(p_overhead, p_roof) if w.host_overlaps else p_overhead + p_roof
    ttft = p_time + w.prefill_comm_s
    tpot = f.step_overhead_ms / 1e3 + max(d_memory, d_compute) + w.decode_comm_s
    bound_p = "compute" if p_compute >= p_memory else "memory"
    bound_d = "memory" if d_memory >= d_compute else "compute"
    if p_overhead > p_roof:
        bound_p = "overhead"
    if f.step_overhead_ms / 1e3 > max(d_memory, d_compute):
        bound_d = "overhead"
    return ttft, tpot, bound_p, bound_d
