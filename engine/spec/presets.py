"""Named recipe presets: the seed's toolbox as one-click starting points (pure).

Each preset is an engine and the recipe knobs it sets away from that engine's defaults,
with a one-line description. Whether a preset can run on a device (and a model kind) is
never decided here: :func:`preset_problem` builds the job spec and lets the spec's own
rules (:mod:`engine.spec.rules`) say why not. The Launch page lists the presets that can
run first, greys the others with that reason, and fills its form with a picked preset, so
every knob stays editable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from engine.spec.base import SpecError
from engine.spec.job import parse_job_spec
from engine.spec.recipes import RECIPE_CLASSES


@dataclass(frozen=True)
class RecipePreset:
    """One named recipe: the engine, the knobs it sets (the rest at their defaults), what it is."""

    key: str
    name: str
    description: str
    recipe: dict[str, Any] = field(default_factory=dict)
    engine: str = "transformers"

    def recipe_data(self) -> dict[str, Any]:
        """The recipe section of a job spec."""
        return {"engine": self.engine, **self.recipe}


RECIPE_PRESETS: tuple[RecipePreset, ...] = (
    RecipePreset("baseline", "Baseline", "The engine's defaults: float32 on the CPU, bfloat16 on a GPU, eager."),
    RecipePreset(
        "bf16", "bfloat16", "Weights and activations in bfloat16 (half the memory of float32).", {"dtype": "bfloat16"}
    ),
    RecipePreset("fp16", "float16", "Weights and activations in float16 (GPUs only).", {"dtype": "float16"}),
    RecipePreset(
        "int8_weight_only",
        "INT8 weight-only",
        "torchao int8 weights, activations in the model's precision: a quarter of float32's weight memory.",
        {"quantization": "torchao_int8_weight_only"},
    ),
    RecipePreset(
        "int8_dynamic",
        "INT8 dynamic",
        "torchao int8 weights and dynamically quantized int8 activations.",
        {"quantization": "torchao_int8_dynamic"},
    ),
    RecipePreset(
        "int4_weight_only",
        "INT4 weight-only",
        "torchao int4 weights with bfloat16 activations (CUDA kernels).",
        {"quantization": "torchao_int4_weight_only", "dtype": "bfloat16"},
    ),
    RecipePreset(
        "gptq_4bit_g128",
        "GPTQ 4-bit g128",
        "GPTQ calibrated 4-bit weights in groups of 128 (quantized once per model, then cached).",
        {"quantization": "gptq", "gptq_bits": 4, "gptq_group_size": 128},
    ),
    RecipePreset(
        "fp8",
        "FP8",
        "torchao float8 weights and activations (GPUs of compute capability 8.9+).",
        {"quantization": "torchao_float8"},
    ),
    RecipePreset("nf4", "NF4", "bitsandbytes 4-bit NormalFloat weights (CUDA only).", {"quantization": "bnb_nf4"}),
    RecipePreset(
        "static_compile",
        "Static cache + compile",
        "Preallocated KV cache and torch.compile of the forward pass (the warm-up compiles; excluded from timings).",
        {"cache_implementation": "static", "compile": True},
    ),
    RecipePreset(
        "quantized_kv",
        "Quantized KV cache",
        "KV cache stored in 4 bits (quanto): less memory per token of context.",
        {"kv_cache_quantization": "quanto_int4"},
    ),
    RecipePreset(
        "prompt_lookup",
        "Prompt-lookup speculative decoding",
        "Draft tokens copied from n-grams of the prompt, verified in one pass (no draft model).",
        {"speculative": "prompt_lookup"},
    ),
    RecipePreset(
        "assistant",
        "Assistant-model speculative decoding",
        "A small draft model with the same tokenizer proposes tokens (here: the demo model).",
        {"speculative": "assistant", "assistant_model": "demo"},
    ),
    RecipePreset(
        "drop_layers",
        "Drop N layers",
        "Pruning: remove 4 decoder layers from the middle (change N after picking).",
        {"drop_layers": 4},
    ),
    RecipePreset(
        "continuous_batching",
        "Continuous batching",
        "transformers' continuous batching with a paged cache: requests join and leave the batch per step.",
        {"batching": "continuous"},
    ),
    RecipePreset(
        "tensor_parallel",
        "Tensor parallel",
        "The model split over several GPUs (tp_plan='auto'); on the CPU two processes share its cores.",
        {"tensor_parallel": True},
    ),
)
PRESETS_BY_KEY: dict[str, RecipePreset] = {p.key: p for p in RECIPE_PRESETS}
_LOCATION = re.compile(r"^recipe(\.[\w-]+)*: ")


def preset_problem(preset: RecipePreset, device: str, source: str = "demo") -> str | None:
    """Why ``preset`` cannot run on ``device`` with the model ``source`` (the spec's rules say); None when it can."""
    try:
        parse_job_spec({"model": {"source": source or "demo"}, "recipe": preset.recipe_data(), "device": device})
    except SpecError as exc:
        return _LOCATION.sub("", str(exc))
    return None


def presets_for(device: str, source: str = "demo") -> list[tuple[RecipePreset, str | None]]:
    """Every preset with the reason it cannot run here (None: it can); the runnable ones first, in toolbox order."""
    rated = [(p, preset_problem(p, device, source)) for p in RECIPE_PRESETS]
    return [r for r in rated if r[1] is None] + [r for r in rated if r[1] is not None]


def preset_of(recipe: dict[str, Any]) -> RecipePreset | None:
    """The preset whose knobs a recipe has exactly (the others at their defaults), if any."""
    engine = recipe.get("engine", "transformers")
    cls = RECIPE_CLASSES.get(engine)
    if cls is None:
        return None
    defaults = cls.field_defaults()
    full = {**defaults, **{k: v for k, v in recipe.items() if k != "engine"}}
    return next((p for p in RECIPE_PRESETS if p.engine == engine and full == {**defaults, **p.recipe}), None)
