"""Which vLLM knobs a device kind and a model kind can run, and why not (pure; both vLLM engines).

:data:`DEPENDENCIES`: knobs that only matter with another knob set (see :mod:`engine.spec.rules`);
:func:`job_problems`: what a device kind (``cpu`` or ``cuda:N[,M...]``) and a model kind allow
(used by ``JobSpec`` validation). Whether vLLM is installed on the job's machine is said by
:mod:`engine.backends.vllm.preflight`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.spec.device import gpu_count
from engine.spec.rules import Dependency

if TYPE_CHECKING:  # the recipe imports this module; keep the import one-way at runtime
    from engine.backends.vllm.recipe import VllmKnobs

_DRAFTS = ("draft", "eagle", "eagle3")
DEPENDENCIES: tuple[Dependency, ...] = (
    ("num_speculative_tokens", lambda r: r["speculative"] != "none", "speculative=ngram, draft, eagle or eagle3"),
    ("prompt_lookup_min", lambda r: r["speculative"] == "ngram", "speculative=ngram"),
    ("prompt_lookup_max", lambda r: r["speculative"] == "ngram", "speculative=ngram"),
    ("speculative_model", lambda r: r["speculative"] in _DRAFTS, "speculative=draft, eagle or eagle3"),
)


def job_problems(recipe: VllmKnobs, device: str, model_kind: str | None = None) -> list[str]:
    """What this device kind and model kind cannot run with the recipe (pure)."""
    problems: list[str] = []
    gpus = gpu_count(device)
    if gpus == 0:
        if recipe.dtype == "float16":
            problems.append("vLLM's CPU backend has no float16; use float32 (or bfloat16 on AVX512-BF16 CPUs)")
        if recipe.quantization == "fp8":
            problems.append("quantization=fp8 fails on vLLM's CPU backend; try kv_cache_dtype=fp8 or a GPU")
        if recipe.quantization in ("gptq_marlin", "awq_marlin", "fp8_per_channel", "modelopt"):
            problems.append(f"{recipe.quantization} needs a CUDA GPU")
        if recipe.quantization == "int8_per_channel_weight_only" and recipe.dtype != "bfloat16":
            problems.append("int8_per_channel_weight_only runs on vLLM's CPU backend with dtype=bfloat16 only")
        if recipe.tensor_parallel_size > 1:
            problems.append("tensor_parallel_size > 1 needs that many CUDA GPUs (device cuda:0,1,...)")
        if recipe.gpu_memory_utilization != type(recipe).model_fields["gpu_memory_utilization"].default:
            problems.append(
                "gpu_memory_utilization is only used on a GPU; on the CPU the KV cache size is cpu_kvcache_space_gib"
            )
    elif recipe.cpu_kvcache_space_gib != type(recipe).model_fields["cpu_kvcache_space_gib"].default:
        problems.append(
            "cpu_kvcache_space_gib is only used on the CPU; on a GPU vLLM sizes its cache by gpu_memory_utilization"
        )
    if gpus and recipe.tensor_parallel_size != gpus:
        problems.append(
            f"tensor_parallel_size={recipe.tensor_parallel_size} but {gpus} GPU(s) picked; "
            f"pick a device with {recipe.tensor_parallel_size} GPU(s)"
        )
    if model_kind == "synthetic" and recipe.engine != "vllm":
        problems.append(
            "the managed vLLM server needs real weights and a tokenizer; synthetic weights run with "
            "engine vllm (in process, random weights built by vLLM), or use demo, a folder or org/name"
        )
    if model_kind == "synthetic" and recipe.speculative not in ("none", "ngram"):
        problems.append("speculative decoding with a draft model needs real weights; use ngram or a real model")
    return problems
