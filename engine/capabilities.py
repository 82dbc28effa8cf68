"""The one place that says which transformers knobs a device can run, and why not.

Three layers, from cheapest to most informed:

* :func:`recipe_problems` - knobs that contradict each other, whatever the device
  (pure; used by ``TransformersRecipe`` validation).
* :func:`job_problems` - what a device kind (``cpu`` or ``cuda:N[,M...]``), a workload
  and a model kind allow (pure; used by ``JobSpec`` validation, so a spec that cannot
  run is never queued).
* :func:`runtime_problems` - facts only known on the machine that runs the job: GPU
  compute capability, GPU count, installed packages. The facts are
  gathered by :func:`probe` (imports torch lazily) and judged by a pure function;
  :func:`check_runtime` is the call ``engine.runner.preflight`` makes.

:func:`options` turns the same rules into "which values of each knob can I pick here,
and why not the others" for the Launch page and the CLI.

Nothing here imports torch at module level, so the UI can import it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

if TYPE_CHECKING:  # the spec imports this module; keep the import one-way at runtime
    from engine.spec import TransformersRecipe, Workload

FLOAT8_MIN_CAPABILITY = (8, 9)
BF16_MIN_CAPABILITY = (8, 0)
FLASH_MIN_CAPABILITY = (8, 0)

# Packages a knob needs, with the line a user can paste to install them.
PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "torchao": (("torchao",), "pip install torchao==0.18.0"),
    "bitsandbytes": (("bitsandbytes",), "pip install bitsandbytes==0.50.2"),
    "gptq": (("gptqmodel", "optimum"), "pip install gptqmodel==7.6.0 optimum==2.3.0"),
    "quanto": (("optimum.quanto",), "pip install optimum-quanto==0.2.7"),
    "hqq": (("hqq",), "pip install hqq"),
    "flash_attn": (("flash_attn",), "pip install flash-attn"),
}

# Model families whose attention honours ``config.sliding_window`` in transformers.
SLIDING_WINDOW_MODEL_TYPES: frozenset[str] = frozenset(
    {"mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "starcoder2", "phi3", "gemma2", "gemma3_text"}
)

_TORCHAO = ("torchao_int8_weight_only", "torchao_int8_dynamic", "torchao_int4_weight_only", "torchao_float8")
_BNB = ("bnb_nf4", "bnb_int8")


def _gpu_count(device: str) -> int:
    return 0 if device == "cpu" else len(device.split(":", 1)[1].split(","))


def tensor_parallel_world_size(recipe: Any, device: str) -> int:
    """Processes a run needs: one per GPU picked (on the CPU, the recipe's ranks, default 2); 1 without TP."""
    if not getattr(recipe, "tensor_parallel", False) or getattr(recipe, "engine", None) != "transformers":
        return 1
    return _gpu_count(device) or (recipe.tensor_parallel_ranks or 2)


# -- pure, device-independent ---------------------------------------------------------
def recipe_problems(recipe: TransformersRecipe) -> list[str]:
    """Knobs of one recipe that contradict each other (any device); empty when fine."""
    problems: list[str] = []
    r = recipe
    if r.compile and r.cache_implementation != "static":
        problems.append(
            "compile needs cache_implementation=static (transformers compiles generation only with a static cache)"
        )
    if r.kv_cache_quantization != "none" and r.cache_implementation == "static":
        problems.append("a quantized KV cache is a dynamic cache; use cache_implementation=dynamic with it")
    if r.speculative != "none":
        if r.cache_implementation == "static":
            problems.append("speculative decoding runs with the dynamic cache; use cache_implementation=dynamic")
        if r.kv_cache_quantization != "none":
            problems.append("speculative decoding cannot use a quantized KV cache")
        if r.batching == "continuous":
            problems.append("continuous batching does not do speculative decoding; use batching=static")
    if r.speculative == "assistant" and not r.assistant_model:
        problems.append("speculative=assistant needs assistant_model (a model with the same tokenizer, e.g. 'demo')")
    if r.assistant_model and r.speculative != "assistant":
        problems.append("assistant_model is only used with speculative=assistant")
    if r.speculative == "early_exit" and r.early_exit_layer is None:
        problems.append("speculative=early_exit needs early_exit_layer (how many layers draft the tokens)")
    if r.early_exit_layer is not None and r.speculative != "early_exit":
        problems.append("early_exit_layer is only used with speculative=early_exit")
    if r.batching == "continuous":
        if r.cache_implementation == "static" or r.compile:
            problems.append(
                "continuous batching uses its own paged cache; leave cache_implementation=dynamic, compile off"
            )
        if r.kv_cache_quantization != "none":
            problems.append("continuous batching has no quantized KV cache")
        if r.tensor_parallel:
            problems.append("continuous batching with tensor parallelism is not offered; pick one")
    if r.tensor_parallel_ranks is not None and not r.tensor_parallel:
        problems.append("tensor_parallel_ranks is only used with tensor_parallel")
    if r.tensor_parallel:
        unsupported = [
            name
            for name, on in (
                ("weight quantization", r.quantization != "none"),
                ("a quantized KV cache", r.kv_cache_quantization != "none"),
                ("speculative decoding", r.speculative != "none"),
                ("torch.compile", r.compile),
            )
            if on
        ]
        if unsupported:
            problems.append(
                f"tensor parallelism is offered with precision, attention, cache, pruning and sliding-window knobs; "
                f"not with {', '.join(unsupported)} (tp_plan shards plain Linear layers; the others are unchecked)"
            )
    if r.quantization == "torch_dynamic_int8" and r.dtype not in ("auto", "float32"):
        problems.append("torch_dynamic_int8 quantizes float32 Linear layers; use dtype=float32 (or auto)")
    if r.quantization == "torchao_int4_weight_only" and r.dtype == "float32":
        problems.append(
            "torchao int4 weight-only kernels take bfloat16 activations; use dtype=bfloat16 (or auto on a GPU)"
        )
    if r.quantization == "gptq" and r.gptq_group_size == 0:
        problems.append("gptq_group_size must be a positive number of weights or -1 (one group per column)")
    return problems


def job_problems(
    recipe: TransformersRecipe, device: str, workload: Workload | None = None, model_kind: str | None = None
) -> list[str]:
    """What this device kind, workload and model kind cannot run with the recipe (pure)."""
    problems: list[str] = []
    r = recipe
    gpus = _gpu_count(device)
    if gpus == 0:
        if r.dtype == "float16":
            problems.append("float16 is not supported on the CPU; use float32 or bfloat16")
        if r.attn_implementation == "flash_attention_2":
            problems.append("flash_attention_2 needs a CUDA device; use sdpa or eager on the CPU")
        if r.quantization in _BNB:
            problems.append(
                f"{r.quantization} (bitsandbytes) needs a CUDA device; on the CPU try torchao_int8_weight_only"
            )
        if r.quantization == "torchao_float8":
            problems.append("torchao_float8 needs a CUDA GPU with compute capability >= 8.9 (Ada, Hopper or newer)")
        if r.quantization == "torchao_int4_weight_only":
            problems.append(
                "torchao 0.18 has no CPU kernel for int4 weight-only (its int4 layouts need CUDA); "
                "on the CPU try torchao_int8_weight_only"
            )
    else:
        if r.cpu_threads is not None:
            problems.append("cpu_threads sets the CPU's torch threads; leave it empty on a GPU")
        if r.quantization == "torch_dynamic_int8":
            problems.append(
                "torch_dynamic_int8 (torch.ao quantize_dynamic) runs on the CPU only; on a GPU try torchao_int8_dynamic"
            )
        if r.tensor_parallel and gpus < 2:
            problems.append("tensor parallelism needs two or more GPUs; pick a device like cuda:0,1")
        if r.tensor_parallel and r.tensor_parallel_ranks not in (None, gpus):
            problems.append(
                f"tensor_parallel_ranks={r.tensor_parallel_ranks} but {gpus} GPU(s) picked: on GPUs there is "
                "one rank per GPU (leave it empty)"
            )
    if workload is not None:
        if r.tensor_parallel and workload.arrival != "batch":
            problems.append(
                "tensor parallelism runs static batches (arrival=batch): every rank must make the same calls, "
                "and arrival processes depend on timing"
            )
        if r.speculative != "none" and workload.batch_size > 1:
            problems.append("speculative decoding in transformers runs one request at a time; use batch_size=1")
        if r.compile and workload.prompt_file is not None:
            problems.append("compile recompiles for every new prompt length; use prompt_tokens (one length) with it")
    if model_kind == "synthetic":
        if r.quantization == "gptq":
            problems.append("gptq calibrates on text; synthetic weights have no tokenizer (use a real model)")
        if r.speculative == "assistant":
            problems.append("an assistant model must share the main model's tokenizer; synthetic weights have none")
        if r.tensor_parallel:
            problems.append(
                "tensor parallelism shards weights as they load; synthetic weights are built in place "
                "(use a real model: demo, a folder or org/name)"
            )
    return problems


def notes(recipe: TransformersRecipe, device: str) -> list[str]:
    """Warnings that do not block the run (slow warm-ups, known slow paths)."""
    out: list[str] = []
    cpu = device == "cpu"
    if recipe.compile:
        out.append(
            "torch.compile: the warm-up compiles the model (~45 s cold on a 2-core CPU, 20-70 s on a GPU); "
            "it is excluded from the measurements and recorded as warmup_s"
        )
    if cpu and recipe.quantization == "torchao_int8_weight_only":
        out.append("int8 weight-only saves memory but decodes about 2x slower than float32 on this kind of CPU")
    if recipe.kv_cache_quantization.startswith("quanto") and cpu:
        out.append("the first quanto KV cache use builds its C++ extension (about a minute, once per machine)")
    if recipe.quantization == "gptq":
        out.append("gptq quantizes once per model and settings (minutes) and caches the result by fingerprint")
    if recipe.tensor_parallel and cpu:
        out.append(
            f"tensor parallelism on the CPU: {tensor_parallel_world_size(recipe, device)} processes share its cores "
            "(gloo); it checks a sharded recipe, it does not make decoding faster"
        )
    return out


def shape_problems(recipe: Any, config: dict[str, Any] | None, device: str) -> list[str]:
    """What the model's shapes forbid (pure): GPTQ groups that do not tile the Linear inputs,
    tensor-parallel ranks that do not divide the attention heads."""
    if not config or getattr(recipe, "engine", None) != "transformers":
        return []
    problems: list[str] = []
    hidden = config.get("hidden_size")
    heads = config.get("num_attention_heads")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or (hidden // heads if isinstance(hidden, int) and heads else None)
    dims = sorted(
        {d for d in (hidden, config.get("intermediate_size"), heads * head_dim if heads and head_dim else None) if d}
    )
    group = recipe.gptq_group_size
    if recipe.quantization == "gptq" and group > 0 and dims and any(d % group for d in dims):
        fits = [g for g in (256, 128, 64, 32, 16) if all(d % g == 0 for d in dims)]
        problems.append(
            f"gptq_group_size {group} does not divide this model's Linear input sizes {', '.join(map(str, dims))}; "
            f"pick {' or '.join(map(str, fits[:2])) if fits else 'a divisor'} (or -1 for one group per column)"
        )
    world = tensor_parallel_world_size(recipe, device)
    inter = config.get("intermediate_size") or 0
    if world > 1 and heads and kv_heads and (heads % world or kv_heads % world or inter % world):
        fits = [n for n in range(2, 9) if heads % n == 0 and kv_heads % n == 0 and inter % n == 0]
        unit = "GPUs" if _gpu_count(device) else "ranks"
        problems.append(
            f"tensor parallelism over {world} {unit} needs the {heads} attention heads, {kv_heads} key/value heads "
            f"and {inter} MLP columns to split evenly; "
            + (f"use {' or '.join(map(str, fits))} {unit}" if fits else "this model cannot be split that way")
        )
    return problems


# -- forms -------------------------------------------------------------------------------
def option_reason(field_name: str, value: Any, device: str) -> str | None:
    """Why ``field_name=value`` (other knobs at their defaults) cannot run on ``device``; None when it can."""
    from pydantic import ValidationError

    from engine.spec import TransformersRecipe

    base: dict[str, Any] = {field_name: value}
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
    from engine.spec import TransformersRecipe

    out: dict[str, dict[Any, str | None]] = {}
    for name, info in TransformersRecipe.model_fields.items():
        if name == "engine":
            continue
        values: tuple[Any, ...] = (False, True) if info.annotation is bool else get_args(info.annotation)
        if not values or not all(isinstance(v, str | bool | int) for v in values):
            continue
        out[name] = {v: option_reason(name, v, device) for v in values}
    return out


# -- facts known only where the job runs ---------------------------------------------------
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

    GPUs are read through NVML (engine.devices), never torch, so the app's server can
    check a spec without importing torch. Indices are physical, as in the spec.
    """
    installed = frozenset(key for key, (mods, _hint) in PACKAGES.items() if _installed(mods))
    if device == "cpu":
        return DeviceFacts(installed=installed)
    from engine.devices import compute_capability, cuda_devices

    gpus = cuda_devices()
    if not gpus:
        return DeviceFacts(installed=installed)
    index = int(device.split(":")[1].split(",")[0])
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
    gpus = _gpu_count(device)
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
    if r.quantization in _TORCHAO:
        problems.append(_needs("torchao", r.quantization, facts) or "")
    if r.quantization in _BNB:
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
    from engine.spec import SpecError, TransformersRecipe

    if not isinstance(recipe, TransformersRecipe):
        return
    problems = runtime_problems(recipe, device, probe(device))
    if recipe.quantization == "gptq" and recipe.gptq_calibration_file:
        from pathlib import Path

        if not Path(recipe.gptq_calibration_file).expanduser().is_file():
            problems.append(f"gptq calibration file {recipe.gptq_calibration_file} does not exist")
    if problems:
        raise SpecError("; ".join(problems))
    if recipe.speculative == "assistant" and recipe.assistant_model:
        from engine import models
        from engine.spec import ModelSpec

        try:
            assistant = ModelSpec(source=recipe.assistant_model)
        except ValueError as exc:
            raise SpecError(f"assistant_model: {exc}") from exc
        if assistant.kind == "synthetic":
            raise SpecError("assistant_model must be a real model sharing the main model's tokenizer, not synthetic")
        models.check(assistant)
