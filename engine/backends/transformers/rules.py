"""Which transformers knobs a device kind can run, and why not (pure).

* :func:`recipe_problems` - knobs that contradict each other, whatever the device (used by
  ``TransformersRecipe`` validation).
* :func:`job_problems` - what a device kind (``cpu`` or ``cuda:N[,M...]``), a workload and a
  model kind allow (used by ``JobSpec`` validation, so a spec that cannot run is never queued).
* :func:`shape_problems`, :func:`layer_problems` - what a model's config allows (heads that
  split over ranks, GPTQ groups that tile the Linear inputs, layers left after dropping).
* :data:`DEPENDENCIES` - knobs that only matter with another knob set (``gptq_bits`` with
  ``quantization=gptq``; see :mod:`engine.spec.rules`).

Facts known only on the machine that runs a job (GPU compute capability, installed
packages) are judged by :mod:`engine.backends.transformers.preflight` with the thresholds
and install hints here. :mod:`engine.spec.forms` turns the same rules into "which values of
each knob can I pick here, and why not the others" for the Launch page and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.spec.device import gpu_count
from engine.spec.rules import Dependency, unused_knob_problems

if TYPE_CHECKING:  # the recipe imports this module; keep the import one-way at runtime
    from engine.backends.transformers.recipe import TransformersRecipe
    from engine.jsonvalue import JSONObject
    from engine.spec.workload import Workload

FLOAT8_MIN_CAPABILITY = (8, 9)
BF16_MIN_CAPABILITY = (8, 0)
FLASH_MIN_CAPABILITY = (8, 0)

# Packages a knob needs, with the line a user can paste to install them.
PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "torchao": (("torchao",), "pip install torchao==0.18.0"),
    "bitsandbytes": (("bitsandbytes",), "pip install bitsandbytes==0.50.2"),
    "gptq": (("gptqmodel", "optimum"), "pip install gptqmodel==7.6.0 optimum==2.3.0"),
    "quanto": (("optimum.quanto",), "pip install optimum-quanto==0.2.7"),
    "hqq": (("hqq",), "pip install hqq==0.2.8.post1"),
    "flash_attn": (("flash_attn",), "pip install flash-attn"),
}

# Model families whose attention honours ``config.sliding_window`` in transformers.
SLIDING_WINDOW_MODEL_TYPES: frozenset[str] = frozenset(
    {"mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "starcoder2", "phi3", "gemma2", "gemma3_text"}
)

TORCHAO_METHODS = ("torchao_int8_weight_only", "torchao_int8_dynamic", "torchao_int4_weight_only", "torchao_float8")
BNB_METHODS = ("bnb_nf4", "bnb_int8")


def tensor_parallel_world_size(recipe: TransformersRecipe, device: str) -> int:
    """Processes a run needs: one per GPU picked (on the CPU, the recipe's ranks, default 2); 1 without TP."""
    if not recipe.tensor_parallel:
        return 1
    return gpu_count(device) or (recipe.tensor_parallel_ranks or 2)


# -- knobs that only matter with another knob (engine.spec.rules) ---------------------------
DEPENDENCIES: tuple[Dependency, ...] = (
    ("compile_mode", lambda r: r["compile"], "compile=true"),
    *(
        (knob, lambda r: r["quantization"] == "gptq", "quantization=gptq")
        for knob in ("gptq_bits", "gptq_group_size", "gptq_desc_act", "gptq_calibration_file")
    ),
    (
        "num_speculative_tokens",
        lambda r: r["speculative"] != "none",
        "speculative=prompt_lookup, assistant or early_exit",
    ),
    ("prompt_lookup_ngram", lambda r: r["speculative"] == "prompt_lookup", "speculative=prompt_lookup"),
    ("assistant_model", lambda r: r["speculative"] == "assistant", "speculative=assistant"),
    ("early_exit_layer", lambda r: r["speculative"] == "early_exit", "speculative=early_exit"),
    ("drop_layers_from", lambda r: r["drop_layers"] > 0, "drop_layers > 0"),
    ("tensor_parallel_ranks", lambda r: r["tensor_parallel"], "tensor_parallel"),
)


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
    if r.speculative == "early_exit" and r.early_exit_layer is None:
        problems.append("speculative=early_exit needs early_exit_layer (how many layers draft the tokens)")
    if r.batching == "continuous":
        if r.cache_implementation == "static" or r.compile:
            problems.append(
                "continuous batching uses its own paged cache; leave cache_implementation=dynamic, compile off"
            )
        if r.kv_cache_quantization != "none":
            problems.append("continuous batching has no quantized KV cache")
        if r.tensor_parallel:
            problems.append("continuous batching with tensor parallelism is not offered; pick one")
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
    return problems + unused_knob_problems(DEPENDENCIES, dict(r), r.field_defaults())


def _workload_problems(r: TransformersRecipe, workload: Workload) -> list[str]:
    """What the transformers recipe cannot run with this workload."""
    out: list[str] = []
    if r.tensor_parallel and workload.arrival != "batch":
        out.append(
            "tensor parallelism runs static batches (arrival=batch): every rank must make the same calls, "
            "and arrival processes depend on timing"
        )
    if r.tensor_parallel and workload.until_ci_pct is not None:
        out.append(
            "adaptive stopping (until_ci_pct) depends on timing, but every tensor-parallel rank must run the "
            "same rounds; use a fixed number of trials"
        )
    if r.speculative != "none" and workload.batch_size > 1:
        out.append("speculative decoding in transformers runs one request at a time; use batch_size=1")
    if r.compile and not workload.traffic.one_prompt_length():
        out.append(
            f"compile recompiles for every new prompt length, and the {workload.traffic.words()} have more than one; "
            "use synthetic prompts of one length (prompt_tokens, prompt_length=fixed) with it"
        )
    return out


def job_problems(
    recipe: TransformersRecipe, device: str, workload: Workload | None = None, model_kind: str | None = None
) -> list[str]:
    """What this device kind, workload and model kind cannot run with the recipe (pure)."""
    problems: list[str] = []
    r = recipe
    gpus = gpu_count(device)
    if gpus == 0:
        if r.dtype == "float16":
            problems.append("float16 is not supported on the CPU; use float32 or bfloat16")
        if r.attn_implementation == "flash_attention_2":
            problems.append("flash_attention_2 needs a CUDA device; use sdpa or eager on the CPU")
        if r.quantization in BNB_METHODS:
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
        problems += _workload_problems(r, workload)
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


def shape_problems(recipe: TransformersRecipe, config: JSONObject | None, device: str) -> list[str]:
    """What the model's shapes forbid (pure): GPTQ groups that do not tile the Linear inputs,
    tensor-parallel ranks that do not divide the attention heads."""
    if not config:
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
        unit = "GPUs" if gpu_count(device) else "ranks"
        problems.append(
            f"tensor parallelism over {world} {unit} needs the {heads} attention heads, {kv_heads} key/value heads "
            f"and {inter} MLP columns to split evenly; "
            + (f"use {' or '.join(map(str, fits))} {unit}" if fits else "this model cannot be split that way")
        )
    return problems


def layer_problems(recipe: TransformersRecipe, config: JSONObject | None) -> list[str]:
    """``drop_layers`` must leave at least one decoder layer (the count is in the declared config)."""
    dropped = recipe.drop_layers
    layers = next((config[k] for k in ("num_hidden_layers", "n_layer", "num_layers") if config and config.get(k)), None)
    if not dropped or not isinstance(layers, int) or dropped < layers:
        return []
    return [
        f"drop_layers {dropped} would remove every one of this model's {layers} decoder layers; drop at most {layers - 1}"
    ]
