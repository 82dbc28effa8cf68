"""Recipe presets: every one is a valid spec where the rules allow it, greyed with the rules' reason elsewhere."""

from __future__ import annotations

import pytest

from engine.backends.transformers.recipe import TransformersRecipe
from engine.spec import engines, parse_job_spec, sources
from engine.spec.forms import WORKLOAD_LABELS, hidden_fields, label
from engine.spec.presets import all_presets, preset_by_key, preset_of, preset_problem, presets_for
from engine.spec.workload import Workload

TOOLBOX = {
    "baseline",
    "bf16",
    "fp16",
    "int8_weight_only",
    "int8_dynamic",
    "int4_weight_only",
    "gptq_4bit_g128",
    "fp8",
    "nf4",
    "static_compile",
    "quantized_kv",
    "prompt_lookup",
    "assistant",
    "drop_layers",
    "continuous_batching",
    "tensor_parallel",
}


def test_the_toolbox_is_covered_with_descriptions():
    assert {p.key for p in all_presets()} == TOOLBOX
    assert len({p.key for p in all_presets()}) == len(all_presets())  # keys are unique across engines
    assert all(p.description and p.name for p in all_presets())


@pytest.mark.parametrize("device", ["cpu", "cuda:0", "cuda:0,1"])
def test_each_preset_is_a_valid_spec_where_it_is_offered(device):
    for preset, why in presets_for(device):
        data = {"model": {"source": "demo"}, "recipe": preset.recipe_data(), "device": device}
        if why is None:
            spec = parse_job_spec(data)
            assert spec.recipe.engine == preset.engine
        else:
            with pytest.raises(ValueError):
                parse_job_spec(data)


def test_runnable_presets_come_first_and_the_others_say_why():
    rated = presets_for("cpu")
    reasons = [why for _, why in rated]
    first_blocked = next(i for i, why in enumerate(reasons) if why)
    assert all(reasons[first_blocked:]), "runnable presets come first"
    blocked = {p.key: why for p, why in rated if why}
    assert set(blocked) == {"fp16", "int4_weight_only", "fp8", "nf4"}
    assert "float16 is not supported on the CPU" in blocked["fp16"]
    assert "CUDA" in blocked["nf4"] and not blocked["nf4"].startswith("recipe")
    assert preset_problem(preset_by_key("tensor_parallel"), "cuda:0") is not None
    assert preset_problem(preset_by_key("tensor_parallel"), "cuda:0,1") is None


def test_model_kind_counts_for_validity():
    why = preset_problem(preset_by_key("assistant"), "cpu", "synthetic:llama-3.2-1b")
    assert why and "tokenizer" in why


def test_a_recipe_is_recognised_as_its_preset():
    assert preset_of({"engine": "transformers", "dtype": "bfloat16"}) is preset_by_key("bf16")
    full = TransformersRecipe(quantization="gptq", gptq_bits=4, gptq_group_size=128).model_dump()
    assert preset_of(full) is preset_by_key("gptq_4bit_g128")
    assert preset_of({"engine": "transformers", "dtype": "bfloat16", "drop_layers": 2}) is None


def test_every_knob_has_a_label_in_words():
    for descriptor in engines.all_engines():  # each engine's descriptor labels its own knobs
        for name in descriptor.recipe.model_fields:
            if name != "engine":
                assert name in descriptor.form.labels, (descriptor.name, name)
    assert all(name in WORKLOAD_LABELS for name in Workload.model_fields)
    for cls in sources.all_sources():  # each request source labels its own options
        assert all(name in cls.labels for name in cls.option_names()), sources.name_of(cls)
    assert label("slo_ttft_ms") == "TTFT SLO (ms)" and label("gptq_bits") == "GPTQ bits per weight"
    assert label("not_a_knob") == "not a knob"


def test_dependent_knobs_are_hidden_until_their_parent_is_set():
    plain = TransformersRecipe().model_dump()
    hidden = hidden_fields("transformers", plain)
    assert {"gptq_bits", "gptq_group_size", "gptq_calibration_file", "prompt_lookup_ngram"} <= set(hidden)
    assert "gptq_bits" not in hidden_fields("transformers", {**plain, "quantization": "gptq"})
    assert "prompt_lookup_ngram" not in hidden_fields("transformers", {**plain, "speculative": "prompt_lookup"})
    assert "cpu_threads" in hidden_fields("transformers", plain, device="cuda:0")
    wl = Workload().model_dump()
    assert {"rate", "burstiness", "until_metric", "max_requests"} <= set(hidden_fields("workload", wl))
    assert "rate" not in hidden_fields("workload", {**wl, "arrival": "poisson"})
    assert "batch_size" in hidden_fields("workload", {**wl, "arrival": "poisson"})
