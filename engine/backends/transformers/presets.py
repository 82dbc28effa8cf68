"""The transformers engine's recipe presets: the seed's toolbox as one-click starting points (pure data).

Each preset names the knobs it sets away from the engine's defaults, with a one-line
description; whether one can run on a device is said by the spec's own rules
(:func:`engine.spec.presets.preset_problem`).
"""

from __future__ import annotations

from engine.jsonvalue import JSONObject
from engine.spec.descriptor import RecipePreset

ENGINE = "transformers"


def _preset(key: str, name: str, description: str, recipe: JSONObject | None = None) -> RecipePreset:
    return RecipePreset(key, name, description, recipe or {}, ENGINE)


RECIPE_PRESETS: tuple[RecipePreset, ...] = (
    _preset("baseline", "Baseline", "The engine's defaults: float32 on the CPU, bfloat16 on a GPU, eager."),
    _preset(
        "bf16", "bfloat16", "Weights and activations in bfloat16 (half the memory of float32).", {"dtype": "bfloat16"}
    ),
    _preset("fp16", "float16", "Weights and activations in float16 (GPUs only).", {"dtype": "float16"}),
    _preset(
        "int8_weight_only",
        "INT8 weight-only (torchao)",
        "torchao int8 weights, activations in the model's precision: a quarter of float32's weight memory.",
        {"quantization": "torchao_int8_weight_only"},
    ),
    _preset(
        "int8_dynamic",
        "INT8 dynamic (torchao)",
        "torchao int8 weights and dynamically quantized int8 activations.",
        {"quantization": "torchao_int8_dynamic"},
    ),
    _preset(
        "int4_weight_only",
        "INT4 weight-only (torchao)",
        "torchao int4 weights with bfloat16 activations (CUDA kernels).",
        {"quantization": "torchao_int4_weight_only", "dtype": "bfloat16"},
    ),
    _preset(
        "gptq_4bit_g128",
        "GPTQ 4-bit g128",
        "GPTQ calibrated 4-bit weights in groups of 128 (quantized once per model, then cached).",
        {"quantization": "gptq", "gptq_bits": 4, "gptq_group_size": 128},
    ),
    _preset(
        "fp8",
        "FP8 (torchao)",
        "torchao float8 weights and activations (GPUs of compute capability 8.9+).",
        {"quantization": "torchao_float8"},
    ),
    _preset(
        "nf4", "NF4 (bitsandbytes)", "bitsandbytes 4-bit NormalFloat weights (CUDA only).", {"quantization": "bnb_nf4"}
    ),
    _preset(
        "static_compile",
        "Static cache + compile",
        "Preallocated KV cache and torch.compile of the forward pass (the warm-up compiles; excluded from timings).",
        {"cache_implementation": "static", "compile": True},
    ),
    _preset(
        "quantized_kv",
        "Quantized KV cache",
        "KV cache stored in 4 bits (quanto): less memory per token of context.",
        {"kv_cache_quantization": "quanto_int4"},
    ),
    _preset(
        "prompt_lookup",
        "Prompt-lookup speculative decoding",
        "Draft tokens copied from n-grams of the prompt, verified in one pass (no draft model).",
        {"speculative": "prompt_lookup"},
    ),
    _preset(
        "assistant",
        "Assistant-model speculative decoding",
        "A small draft model with the same tokenizer proposes tokens (here: the demo model).",
        {"speculative": "assistant", "assistant_model": "demo"},
    ),
    _preset(
        "drop_layers",
        "Drop N layers",
        "Pruning: remove 4 decoder layers from the middle (change N after picking).",
        {"drop_layers": 4},
    ),
    _preset(
        "continuous_batching",
        "Continuous batching",
        "transformers' continuous batching with a paged cache: requests join and leave the batch per step.",
        {"batching": "continuous"},
    ),
    _preset(
        "tensor_parallel",
        "Tensor parallel",
        "The model split over several GPUs (tp_plan='auto'); on the CPU two processes share its cores.",
        {"tensor_parallel": True},
    ),
)
