"""Which runs the estimator models: a recipe in its terms (weight/KV bits, dropped layers) or
the reason it is left out; the counted summary shown on the page and by the CLI."""

from __future__ import annotations

import pytest

from engine.spec import parse_job_spec
from engine.whatif.admit import RunRecipe, admit, left_out_summary

F32 = {"applied": {"dtype": "float32"}}


def spec(recipe: dict | None = None, **workload) -> dict:
    wl = {"prompt_tokens": 32, "output_tokens": 8, "requests": 2, **workload}
    raw = {"model": {"source": "demo"}, "recipe": {"engine": "transformers", **(recipe or {})}, "workload": wl}
    return parse_job_spec(raw).model_dump(mode="json")


@pytest.mark.parametrize(
    "recipe, expected",
    [
        ({}, RunRecipe("fp32", "fp32", "", 0)),
        ({"drop_layers": 6}, RunRecipe("fp32", "fp32", "", 6)),
        ({"quantization": "gptq"}, RunRecipe("int4", "fp32", "gptq", 0)),
        ({"quantization": "gptq", "gptq_bits": 8}, RunRecipe("int8", "fp32", "gptq", 0)),
        ({"quantization": "torchao_int8_weight_only"}, RunRecipe("int8", "fp32", "torchao_int8_weight_only", 0)),
        ({"kv_cache_quantization": "quanto_int4"}, RunRecipe("fp32", "int4", "kv quanto_int4", 0)),
    ],
)
def test_modelled_recipes_in_the_estimators_terms(recipe, expected):
    assert admit(spec(recipe), F32, "cpu") == expected


@pytest.mark.parametrize(
    "recipe, workload, reason",
    [
        ({"speculative": "prompt_lookup"}, {}, "speculative decoding (not modelled)"),
        ({"compile": True, "cache_implementation": "static"}, {}, "torch.compile (not modelled)"),
        ({"cache_implementation": "static"}, {}, "static KV cache (not modelled)"),
        ({"batching": "continuous"}, {}, "continuous batching (not modelled)"),
        ({"quantization": "gptq", "gptq_bits": 3}, {}, "GPTQ 3-bit weights (not modelled)"),
        ({}, {"arrival": "poisson", "rate": 2.0}, "Poisson load (not modelled)"),
        ({}, {"arrival": "concurrency", "max_concurrency": 4}, "fixed-concurrency load (not modelled)"),
        ({}, {"prompt_length": "uniform", "prompt_length_spread": 0.5}, "varying prompt lengths (not modelled)"),
    ],
)
def test_unmodelled_recipes_and_workloads_say_why(recipe, workload, reason):
    assert admit(spec(recipe, **workload), F32, "cpu") == reason


def test_vllm_and_http_engines():
    vllm = {
        "model": {"source": "demo"},
        "recipe": {"engine": "vllm", "kv_cache_dtype": "fp8"},
        "workload": {"prompt_tokens": 8},
    }
    assert admit(vllm, {}, "gpu") == RunRecipe("bf16", "fp8", "kv fp8", 0)
    vllm["recipe"] = {"engine": "vllm", "quantization": "awq"}
    assert admit(vllm, {}, "gpu") == "vLLM awq quantization: weight bits unknown (not modelled)"
    served = {"recipe": {"engine": "openai"}, "workload": {"prompt_tokens": 8}}
    assert admit(served, {}, "cpu") == "openai: served over HTTP (not modelled)"


def test_left_out_summary_counts_reasons_most_first():
    skipped = [
        (1, "Poisson load (not modelled)"),
        (2, "speculative decoding (not modelled)"),
        (3, "speculative decoding (not modelled)"),
        (4, "Poisson load (not modelled)"),
        (5, "speculative decoding (not modelled)"),
    ]
    assert left_out_summary(skipped) == (
        "5 runs left out: 3 speculative decoding (not modelled), 2 Poisson load (not modelled)"
    )
    assert left_out_summary(skipped[:1]) == "1 run left out: 1 Poisson load (not modelled)"
    assert left_out_summary([]) == ""
