"""Forms built from the rules: which values of each knob a device can run, and why not the others;
the knobs in words (:data:`LABELS`), which ones show at once (:data:`BASIC`), and which are hidden
because nothing uses them (:func:`hidden_fields`, from the spec's own dependencies)."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError

from engine.spec.recipes import TransformersRecipe
from engine.spec.rules import job_problems, unused_knobs
from engine.spec.traffic import TRAFFIC_LABELS

# Knobs that only matter with another knob (engine.spec.rules.KNOB_DEPENDENCIES) are checked with it set.
_ENABLERS: dict[str, dict[str, Any]] = {
    "compile_mode": {"compile": True, "cache_implementation": "static"},
    "gptq_bits": {"quantization": "gptq"},
    "gptq_desc_act": {"quantization": "gptq"},
    "drop_layers_from": {"drop_layers": 1},
}


def option_reason(field_name: str, value: Any, device: str) -> str | None:
    """Why ``field_name=value`` (other knobs at their defaults) cannot run on ``device``; None when it can."""
    base: dict[str, Any] = {field_name: value}
    if value != TransformersRecipe.model_fields[field_name].default:
        base.update(_ENABLERS.get(field_name, {}))
    # A knob that only makes sense with a companion gets that companion for the check.
    if field_name == "compile" and value:
        base["cache_implementation"] = "static"
    if field_name == "speculative" and value == "assistant":
        base["assistant_model"] = "demo"
    if field_name == "speculative" and value == "early_exit":
        base["early_exit_layer"] = 4
    if field_name == "quantization" and value == "torchao_int4_weight_only":
        base["dtype"] = "bfloat16"
    try:
        recipe = TransformersRecipe(**base)
    except ValidationError as exc:
        return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
    problems = job_problems(recipe, device)
    return "; ".join(problems) if problems else None


def options(device: str) -> dict[str, dict[Any, str | None]]:
    """Every Literal/bool knob of the transformers recipe: value -> None (can run) or the reason it cannot."""

    out: dict[str, dict[Any, str | None]] = {}
    for name, info in TransformersRecipe.model_fields.items():
        if name == "engine":
            continue
        values: tuple[Any, ...] = (False, True) if info.annotation is bool else get_args(info.annotation)
        if not values or not all(isinstance(v, str | bool | int) for v in values):
            continue
        out[name] = {v: option_reason(name, v, device) for v in values}
    return out


# -- labels, groups and dependencies of the Launch form (declared once, here) -----------------
# Words with units for every knob of every section; a knob missing here falls back to its name.
LABELS: dict[str, str] = {
    # transformers
    "dtype": "Precision (dtype)",
    "attn_implementation": "Attention kernel",
    "quantization": "Weight quantization",
    "gptq_bits": "GPTQ bits per weight",
    "gptq_group_size": "GPTQ group size (weights; -1 per column)",
    "gptq_desc_act": "GPTQ act-order (columns by decreasing activation)",
    "gptq_calibration_file": "GPTQ calibration text file",
    "cache_implementation": "KV cache",
    "compile": "torch.compile",
    "compile_mode": "Compile mode",
    "kv_cache_quantization": "KV cache quantization",
    "speculative": "Speculative decoding",
    "prompt_lookup_ngram": "Prompt-lookup n-gram size (tokens)",
    "num_speculative_tokens": "Draft tokens per step",
    "assistant_model": "Assistant (draft) model",
    "early_exit_layer": "Early-exit draft layers",
    "drop_layers": "Layers dropped",
    "drop_layers_from": "Drop layers from",
    "batching": "Batching",
    "tensor_parallel": "Tensor parallel",
    "tensor_parallel_ranks": "Tensor-parallel processes",
    "sliding_window": "Sliding window (tokens)",
    "cpu_threads": "CPU threads",
    "trust_remote_code": "Trust remote code (runs the model's own Python)",
    # vLLM (in process and server)
    "kv_cache_dtype": "KV cache precision",
    "max_num_seqs": "Max sequences per step",
    "max_num_batched_tokens": "Max tokens per step",
    "max_model_len": "Context length (tokens)",
    "enable_prefix_caching": "Prefix caching",
    "enable_chunked_prefill": "Chunked prefill",
    "block_size": "KV block size (tokens)",
    "prompt_lookup_min": "n-gram min (tokens)",
    "prompt_lookup_max": "n-gram max (tokens)",
    "speculative_model": "Draft model",
    "tensor_parallel_size": "Tensor-parallel GPUs",
    "enforce_eager": "Eager mode",
    "gpu_memory_utilization": "GPU memory share (0-1)",
    "cpu_kvcache_space_gib": "CPU KV cache (GiB)",
    "endpoint": "API endpoint",
    "extra_args": "Extra server flags",
    "startup_timeout_s": "Server start timeout (s)",
    # OpenAI-compatible server
    "base_url": "Server base URL",
    "model_name": "Model name on the server",
    "api_key_env": "API key environment variable (its name)",
    "send_ignore_eos": "Send ignore_eos (fixed output lengths)",
    "timeout_s": "Request timeout (s)",
    # workload
    "prompt_tokens": "Prompt tokens",
    "prompt_file": "Prompt file",
    "output_tokens": "Output tokens",
    "requests": "Requests",
    "batch_size": "Batch size",
    "warmup_requests": "Warm-up requests",
    "ignore_eos": "Ignore end of sequence (fixed output length)",
    "seed": "Random seed",
    "arrival": "Arrival",
    "rate": "Request rate (requests/s)",
    "burstiness": "Burstiness (gamma shape; 1 = Poisson)",
    "max_concurrency": "Max requests in flight",
    "prompt_length": "Prompt lengths",
    "prompt_length_spread": "Prompt length spread (0-1)",
    "slo_ttft_ms": "TTFT SLO (ms)",
    "slo_tpot_ms": "TPOT SLO (ms)",
    "slo_e2el_ms": "End-to-end latency SLO (ms)",
    "max_error_rate": "Max failed share (0-1)",
    "trials": "Trials",
    "until_ci_pct": "Measure until the 95 % CI is within (%)",
    "until_metric": "Metric the CI watches",
    "max_requests": "Most requests (adaptive)",
    "max_seconds": "Most seconds measured (adaptive)",
    "soak_minutes": "Soak: keep sending for (minutes)",
    "profile_steps": "Profile decode steps (0: off)",
    **TRAFFIC_LABELS,
}
# The fields shown at once; every other field of the section sits in the form's "Advanced" expander.
BASIC: dict[str, tuple[str, ...]] = {
    "transformers": (
        "dtype",
        "quantization",
        "gptq_bits",
        "gptq_group_size",
        "gptq_desc_act",
        "gptq_calibration_file",
        "speculative",
        "prompt_lookup_ngram",
        "num_speculative_tokens",
        "assistant_model",
        "early_exit_layer",
        "drop_layers",
        "drop_layers_from",
        "batching",
    ),
    "vllm": (
        "dtype",
        "quantization",
        "kv_cache_dtype",
        "max_num_seqs",
        "speculative",
        "num_speculative_tokens",
        "prompt_lookup_min",
        "prompt_lookup_max",
        "speculative_model",
        "tensor_parallel_size",
    ),
    "openai": ("base_url", "model_name", "endpoint", "api_key_env"),
    "workload": (
        "prompt_tokens",
        "output_tokens",
        "requests",
        "arrival",
        "batch_size",
        "rate",
        "burstiness",
        "max_concurrency",
    ),
}
BASIC["vllm-server"] = (*BASIC["vllm"], "endpoint")
# Form-only dependencies, beyond the spec's (engine.spec.rules.KNOB_DEPENDENCIES): (knob, shown when, what shows it).
# The device is in the values as "_device" ("cpu" or "cuda:...").
_ON_CPU = (lambda v: v["_device"] == "cpu", "the CPU")
_FORM_DEPENDENCIES: dict[str, tuple[tuple[str, Any, str], ...]] = {
    "workload": (
        ("burstiness", lambda v: v["arrival"] == "gamma", "arrival=gamma"),
        ("batch_size", lambda v: v["arrival"] == "batch", "arrival=batch"),
        ("prompt_tokens", lambda v: v["prompt_file"] is None, "no prompt file"),
        ("prompt_length", lambda v: v["prompt_file"] is None, "no prompt file"),
        *(
            (k, lambda v: v["until_ci_pct"] is not None, "until_ci_pct")
            for k in ("until_metric", "max_requests", "max_seconds")
        ),
    ),
    "transformers": (("cpu_threads", *_ON_CPU),),
    "vllm": (
        ("cpu_kvcache_space_gib", *_ON_CPU),
        ("gpu_memory_utilization", lambda v: v["_device"] != "cpu", "a GPU"),
    ),
}
_FORM_DEPENDENCIES["vllm-server"] = _FORM_DEPENDENCIES["vllm"]
# What a hidden knob submits when that is not its default (a prompt file replaces the prompt length).
HIDDEN_VALUES: dict[tuple[str, str], Any] = {("workload", "prompt_tokens"): None}
# Optional knobs the form asks as plain values (no "set" box): their None is said by another knob.
ALWAYS_SET: frozenset[tuple[str, str]] = frozenset({("workload", "prompt_tokens")})


def label(name: str) -> str:
    """The knob in words with its unit ("TTFT SLO (ms)"); its name with spaces when not in :data:`LABELS`."""
    return LABELS.get(name, name.replace("_", " "))


def is_basic(section: str, name: str) -> bool:
    """Whether the form shows ``name`` at once (else in its "Advanced" expander)."""
    return name in BASIC.get(section, ())


def hidden_fields(section: str, values: dict[str, Any], device: str = "cpu") -> dict[str, str]:
    """Knobs of ``section`` (an engine name or 'workload') the other ``values`` leave unused -> what would use
    them; the form hides those (and submits their defaults). ``values`` hold every field of the section."""
    out = dict(unused_knobs(section, values))
    context = {**values, "_device": device}
    for knob, shown, enabler in _FORM_DEPENDENCIES.get(section, ()):
        try:
            if not shown(context):
                out.setdefault(knob, enabler)
        except (KeyError, TypeError):  # a malformed value: validation names it
            continue
    return out
