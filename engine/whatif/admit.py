"""Which stored runs the estimator models, and in what terms; the reason for the others.

The estimator models a recipe by its weight precision, KV-cache precision, layer count
(after dropping layers) and batch size, served in static batches of fixed-length prompts.
A run whose recipe or workload does something else (speculative decoding, torch.compile,
continuous batching, Poisson load ...) would be fitted against a roofline that does not
describe it, so it is left out with a short reason such as "speculative decoding (not
modelled)". Reasons are categories (no run-specific detail) so that they can be counted.

Pure: spec and provenance dicts in, no storage, no torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.spec import engines
from engine.spec.sources.flat import stored_traffic
from engine.spec.workload import flat_workload
from engine.whatif.recipe import normalize_dtype
from engine.whatif.shapes import EstimateError

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping

NOT_MODELLED = "(not modelled)"
# Weight precision of a transformers quantization method (None: bits from other knobs).
TRANSFORMERS_WEIGHTS: dict[str, str | None] = {
    "torchao_int8_weight_only": "int8",
    "torchao_int8_dynamic": "int8",
    "torch_dynamic_int8": "int8",
    "torchao_int4_weight_only": "int4",
    "torchao_float8": "fp8",
    "bnb_nf4": "int4",
    "bnb_int8": "int8",
    "gptq": None,
}
GPTQ_WEIGHTS = {4: "int4", 8: "int8"}
TRANSFORMERS_KV = {"quanto_int4": "int4", "quanto_int2": "int2", "hqq_int4": "int4", "hqq_int8": "int8"}
VLLM_WEIGHTS = {"fp8": "fp8", "fp8_per_channel": "fp8", "int8_per_channel_weight_only": "int8"}
VLLM_KV = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bfloat16": "bf16"}
ARRIVALS = {
    "poisson": "Poisson load",
    "gamma": "gamma (bursty) load",
    "concurrency": "fixed-concurrency load",
    "max": "all-at-once load",
}


@dataclass(frozen=True)
class RunRecipe:
    """A run in the estimator's terms: what a fit and an overlay compare."""

    weight: str
    kv: str
    method: str  # "" for plain weights and cache; else e.g. "gptq", "kv quanto_int4"
    drop_layers: int


def _compute_dtype(recipe: JSONMapping, prov: JSONMapping, kind: str) -> str:
    """The activation precision: what the run's applied (or asked) dtype resolves to."""
    name = (prov.get("applied") or {}).get("dtype") or recipe.get("dtype") or "auto"
    if name == "auto":
        return "fp32" if kind == "cpu" else "bf16"
    return normalize_dtype(str(name), ("fp32", "bf16", "fp16"))


def _transformers_reason(r: JSONMapping, applied: JSONMapping) -> str | None:
    if r.get("speculative", "none") != "none":
        return f"speculative decoding {NOT_MODELLED}"
    if r.get("compile") and applied.get("compile", True):
        return f"torch.compile {NOT_MODELLED}"
    if r.get("cache_implementation", "dynamic") != "dynamic":
        return f"static KV cache {NOT_MODELLED}"
    if r.get("batching", "static") != "static":
        return f"continuous batching {NOT_MODELLED}"
    if r.get("tensor_parallel"):
        return "tensor parallelism (not calibrated yet)"
    if r.get("sliding_window") is not None:
        return f"sliding-window override {NOT_MODELLED}"
    if r.get("cpu_threads") is not None:
        return f"CPU thread count set {NOT_MODELLED}"
    if r.get("quantization", "none") == "gptq" and int(r.get("gptq_bits", 4)) not in GPTQ_WEIGHTS:
        return f"GPTQ {r.get('gptq_bits')}-bit weights {NOT_MODELLED}"
    return None


def _transformers(r: JSONMapping, prov: JSONMapping, kind: str) -> RunRecipe | str:
    applied = prov.get("applied") or {}
    reason = _transformers_reason(r, applied)
    if reason:
        return reason
    compute = _compute_dtype(r, prov, kind)
    quant = r.get("quantization", "none")
    weight, methods = compute, []
    if quant != "none":
        weight = TRANSFORMERS_WEIGHTS.get(quant) or GPTQ_WEIGHTS.get(int(r.get("gptq_bits", 4)), "")
        if not weight:
            return f"{quant} weights {NOT_MODELLED}"
        methods.append(quant)
    kv_quant = r.get("kv_cache_quantization", "none")
    kv = TRANSFORMERS_KV.get(kv_quant, compute)
    if kv_quant != "none":
        methods.append(f"kv {kv_quant}")
    return RunRecipe(weight, kv, ", ".join(methods), int(r.get("drop_layers", 0)))


def _vllm(r: JSONMapping, prov: JSONMapping, kind: str) -> RunRecipe | str:
    if r.get("speculative", "none") != "none":
        return f"speculative decoding {NOT_MODELLED}"
    if int(r.get("tensor_parallel_size", 1)) > 1:
        return "tensor parallelism (not calibrated yet)"
    compute = _compute_dtype(r, prov, kind)
    quant = r.get("quantization", "none")
    weight = compute if quant == "none" else VLLM_WEIGHTS.get(quant)
    if weight is None:
        return f"vLLM {quant} quantization: weight bits unknown {NOT_MODELLED}"
    kv_name = r.get("kv_cache_dtype", "auto")
    kv = compute if kv_name == "auto" else VLLM_KV.get(kv_name, kv_name)
    method = ", ".join(m for m in ("" if quant == "none" else quant, "" if kv_name == "auto" else f"kv {kv_name}") if m)
    return RunRecipe(weight, kv, method, 0)


def nominal_prompt(wl: JSONMapping) -> int | None:
    """The prompt length every request of a flat workload sends (shared prefix included), None when its source
    has none (a dataset, a trace, drawn lengths ...)."""
    traffic = stored_traffic(wl)
    return traffic.nominal_prompt_tokens() if traffic is not None and traffic.one_prompt_length() else None


def workload_reason(wl: JSONMapping) -> str | None:
    """Why a flat workload (:func:`engine.spec.workload.flat_workload`) is not the estimator's (static batches of
    fixed-length prompts), or None."""
    traffic = stored_traffic(wl)
    if traffic is None or traffic.nominal_prompt_tokens() is None:
        return f"{traffic.label if traffic else 'unknown traffic'} workload: prompt length not fixed"
    arrival = wl.get("arrival", "batch")
    if arrival != "batch":
        return f"{ARRIVALS.get(arrival, arrival + ' arrivals')} {NOT_MODELLED}"
    if wl.get("prompt_length", "fixed") != "fixed":
        return f"varying prompt lengths {NOT_MODELLED}"
    return None


# How each what-if family reads a recipe (an engine's descriptor names its family, ``WhatIf.family``).
FAMILIES: dict[str, Callable[[JSONMapping, JSONMapping, str], RunRecipe | str]] = {
    "transformers": _transformers,
    "vllm": _vllm,
}


def family_terms(family: str, recipe: JSONMapping, prov: JSONMapping, kind: str) -> RunRecipe | str:
    """A recipe in the terms of the what-if ``family``, or the reason it is not modelled."""
    terms = FAMILIES.get(family)
    if terms is None:
        return f"{family}: {NOT_MODELLED}"
    try:
        return terms(recipe, prov, kind)
    except (EstimateError, ValueError, TypeError) as exc:
        return f"recipe not understood: {exc}"


def admit(spec: JSONMapping, prov: JSONMapping, kind: str) -> RunRecipe | str:
    """The run's recipe in the estimator's terms, or the reason it is not modelled (or calibrates nothing)."""
    reason = workload_reason(flat_workload(spec.get("workload")))
    if reason:
        return reason
    recipe = spec.get("recipe") or {}
    engine = recipe.get("engine", engines.default().name)
    whatif = descriptor.whatif if (descriptor := engines.find(engine)) else None
    if whatif is None or not whatif.calibrates or whatif.family not in FAMILIES:
        return f"{engine}: {whatif.left_out if whatif else 'not a registered engine'} {NOT_MODELLED}"
    return family_terms(whatif.family, recipe, prov, kind)


def left_out_summary(skipped: list[tuple[int, str]]) -> str:
    """ "5 runs left out: 3 speculative decoding (not modelled), 2 Poisson load (not modelled)"; "" if none."""
    if not skipped:
        return ""
    counts = Counter(reason for _, reason in skipped)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))  # most first, then by name
    parts = ", ".join(f"{n} {reason}" for reason, n in ranked)
    return f"{len(skipped)} run{'s' if len(skipped) != 1 else ''} left out: {parts}"
