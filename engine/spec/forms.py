"""Forms built from the rules: which values of each knob a device can run, and why not the others."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError

from engine.spec.recipes import TransformersRecipe
from engine.spec.rules import job_problems

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
