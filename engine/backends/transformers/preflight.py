"""Pre-flight of the transformers engine on the job's machine: GPUs, compute capability, packages, assistant model.

The descriptor names :func:`check` (``engine.backends.transformers.preflight:check``);
:func:`engine.run.preflight.preflight` calls it. The thresholds and install hints are the
pure rules' (:mod:`engine.backends.transformers.rules`); the facts are gathered here through
NVML (:mod:`engine.measure.devices`), never torch, so the app's server can check a spec
without importing torch.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.backends.transformers.recipe import TransformersRecipe
from engine.backends.transformers.rules import (
    BF16_MIN_CAPABILITY,
    BNB_METHODS,
    FLASH_MIN_CAPABILITY,
    FLOAT8_MIN_CAPABILITY,
    PACKAGES,
    TORCHAO_METHODS,
)
from engine.measure.devices import compute_capability, cuda_devices
from engine.spec.base import SpecError
from engine.spec.device import gpu_count, gpu_indices
from engine.spec.model import ModelSpec
from engine.weights import models

if TYPE_CHECKING:
    from engine.spec.job import JobSpec


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


def check_runtime(recipe: TransformersRecipe, device: str) -> None:
    """Raise :class:`~engine.spec.SpecError` with what this machine lacks for the recipe."""
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


def check(spec: JobSpec, runtime: bool) -> None:
    """This machine's facts for the job's recipe (``runtime`` False: nothing, another host judges them)."""
    if runtime and isinstance(spec.recipe, TransformersRecipe):
        check_runtime(spec.recipe, spec.device)  # compute capability, packages, GPU count
