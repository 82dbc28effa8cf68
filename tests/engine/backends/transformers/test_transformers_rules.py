"""Which transformers knobs each device can run, and the reasons given for the others (pure, fast)."""

from __future__ import annotations

import pytest

from engine.backends.transformers.preflight import DeviceFacts, runtime_problems
from engine.backends.transformers.recipe import TransformersRecipe
from engine.backends.transformers.rules import (
    job_problems,
    notes,
    recipe_problems,
    shape_problems,
    tensor_parallel_world_size,
)
from engine.spec import SpecError, Workload, parse_job_spec
from engine.spec.catalog import SYNTHETIC_ARCHITECTURES
from engine.spec.forms import option_reason, options

ALL = frozenset({"torchao", "bitsandbytes", "gptq", "quanto", "hqq", "flash_attn"})
H200 = DeviceFacts(cuda_available=True, gpu_count=1, compute_capability=(9, 0), installed=ALL)
A100 = DeviceFacts(cuda_available=True, gpu_count=1, compute_capability=(8, 0), installed=ALL)


def _spec(recipe: dict, device: str = "cpu", workload: dict | None = None, model: str = "demo"):
    return parse_job_spec(
        {
            "model": {"source": model},
            "recipe": {"engine": "transformers", **recipe},
            "device": device,
            "workload": workload or {},
        }
    )


def test_defaults_keep_todays_recipe():
    r = TransformersRecipe()
    assert r.quantization == "none" and r.cache_implementation == "dynamic" and not r.compile
    assert r.speculative == "none" and r.batching == "static" and r.drop_layers == 0
    assert r.describe() == "transformers, dtype=auto"
    assert recipe_problems(r) == [] and job_problems(r, "cpu") == []


def test_every_field_is_a_simple_typed_knob_with_a_description():
    for name, info in TransformersRecipe.model_fields.items():
        if name == "engine":
            continue
        assert info.description, name


def test_unknown_knob_is_refused():
    with pytest.raises(SpecError, match="unknown field"):
        _spec({"turbo": True})


@pytest.mark.parametrize(
    "recipe, match",
    [
        ({"compile": True}, "compile needs cache_implementation=static"),
        ({"cache_implementation": "static", "kv_cache_quantization": "quanto_int4"}, "quantized KV cache is a dynamic"),
        ({"speculative": "assistant"}, "needs assistant_model"),
        ({"speculative": "early_exit"}, "needs early_exit_layer"),
        ({"early_exit_layer": 3}, "only used with speculative=early_exit"),
        ({"speculative": "prompt_lookup", "cache_implementation": "static"}, "dynamic cache"),
        ({"batching": "continuous", "speculative": "prompt_lookup"}, "continuous batching does not"),
        ({"quantization": "torch_dynamic_int8", "dtype": "bfloat16"}, "float32"),
    ],
)
def test_contradicting_knobs_say_why(recipe, match):
    with pytest.raises(SpecError, match=match):
        _spec(recipe)


@pytest.mark.parametrize(
    "recipe, match",
    [
        ({"quantization": "bnb_nf4"}, "needs a CUDA device"),
        ({"quantization": "bnb_int8"}, "needs a CUDA device"),
        ({"quantization": "torchao_float8"}, "compute capability >= 8.9"),
        ({"quantization": "torchao_int4_weight_only", "dtype": "bfloat16"}, "no CPU kernel"),
        ({"dtype": "float16"}, "float16 is not supported on the CPU"),
        ({"attn_implementation": "flash_attention_2"}, "needs a CUDA device"),
    ],
)
def test_cuda_only_knobs_are_refused_on_the_cpu(recipe, match):
    with pytest.raises(SpecError, match=match):
        _spec(recipe, "cpu")


def test_cuda_knobs_validate_on_a_gpu_spec():
    for recipe in (
        {"quantization": "bnb_nf4"},
        {"quantization": "torchao_float8"},
        {"quantization": "torchao_int4_weight_only"},
        {"cache_implementation": "static", "compile": True, "compile_mode": "reduce-overhead"},
    ):
        assert _spec(recipe, "cuda:0").recipe.quantization == recipe.get("quantization", "none")
    assert _spec({"tensor_parallel": True}, "cuda:0,1").recipe.tensor_parallel
    with pytest.raises(SpecError, match="two or more GPUs"):
        _spec({"tensor_parallel": True}, "cuda:0")
    with pytest.raises(SpecError, match="CPU only"):
        _spec({"quantization": "torch_dynamic_int8"}, "cuda:0")
    with pytest.raises(SpecError, match="leave it empty on a GPU"):
        _spec({"cpu_threads": 4}, "cuda:0")
    assert _spec({"cpu_threads": 1}).recipe.describe() == "transformers, dtype=auto, 1 CPU thread"


def test_workload_and_model_rules():
    with pytest.raises(SpecError, match="batch_size=1"):
        _spec({"speculative": "prompt_lookup"}, workload={"batch_size": 4})
    with pytest.raises(SpecError, match="no tokenizer"):
        _spec({"quantization": "gptq"}, "cuda:0", model="synthetic:llama-3.2-1b")
    with pytest.raises(SpecError, match="synthetic weights are built in place"):
        _spec({"tensor_parallel": True}, "cuda:0,1", model="synthetic:llama-3.2-1b")
    r = TransformersRecipe(cache_implementation="static", compile=True)
    assert job_problems(r, "cpu", Workload(prompt_tokens=None, prompt_file="x.txt"))


def test_runtime_facts():
    f8 = TransformersRecipe(quantization="torchao_float8")
    assert runtime_problems(f8, "cuda:0", H200) == []
    assert "this GPU has 8.0" in runtime_problems(f8, "cuda:0", A100)[0]
    bare = DeviceFacts(cuda_available=True, gpu_count=1, compute_capability=(9, 0))
    assert "pip install bitsandbytes" in runtime_problems(TransformersRecipe(quantization="bnb_nf4"), "cuda:0", bare)[0]
    gptq = runtime_problems(TransformersRecipe(quantization="gptq"), "cpu", DeviceFacts())
    assert gptq == ["gptq needs the gptqmodel package: pip install gptqmodel==7.6.0 optimum==2.3.0"]
    two = DeviceFacts(cuda_available=True, gpu_count=2, compute_capability=(9, 0), installed=ALL)
    assert runtime_problems(TransformersRecipe(tensor_parallel=True), "cuda:0,1", two) == []
    assert "this machine has 1" in runtime_problems(TransformersRecipe(tensor_parallel=True), "cuda:0,1", H200)[0]
    assert "CUDA is not available" in runtime_problems(TransformersRecipe(), "cuda:0", DeviceFacts())[0]
    assert (
        runtime_problems(
            TransformersRecipe(kv_cache_quantization="quanto_int4"), "cpu", DeviceFacts(installed=frozenset({"quanto"}))
        )
        == []
    )


def test_options_for_forms():
    cpu = options("transformers", "cpu")
    assert cpu["quantization"]["torchao_int8_weight_only"] is None
    assert "CUDA" in cpu["quantization"]["bnb_nf4"]
    assert cpu["compile"][True] is None  # offered with the static cache it needs
    assert "CPU only" in options("transformers", "cuda:0")["quantization"]["torch_dynamic_int8"]
    assert option_reason("transformers", "quantization", "torchao_float8", "cuda:0") is None
    # a knob that needs another one is offered with it (not refused as unused)
    assert cpu["compile_mode"]["max-autotune"] is None and cpu["gptq_bits"][8] is None
    assert cpu["gptq_desc_act"][True] is None and cpu["drop_layers_from"]["end"] is None


def test_notes_warn_about_slow_paths():
    assert any("45 s" in n for n in notes(TransformersRecipe(cache_implementation="static", compile=True), "cpu"))
    assert any("slower" in n for n in notes(TransformersRecipe(quantization="torchao_int8_weight_only"), "cpu"))


def test_describe_names_each_knob():
    r = TransformersRecipe(
        dtype="bfloat16",
        quantization="gptq",
        gptq_bits=8,
        cache_implementation="static",
        compile=True,
        compile_mode="max-autotune",
        drop_layers=2,
        drop_layers_from="end",
        sliding_window=512,
    )
    text = r.describe()
    for part in (
        "gptq int8 g128",
        "static cache",
        "compile(max-autotune)",
        "drop 2 layers (end)",
        "sliding window 512",
    ):
        assert part in text


def test_checking_a_gpu_spec_never_imports_torch():
    """The app's server validates specs; GPU facts come from NVML, never from torch."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from engine.spec import parse_job_spec, SpecError\n"
        "from engine.run.runner import preflight\n"
        "spec = parse_job_spec({'model': {'source': 'synthetic:llama-3.2-1b'}, 'device': 'cuda:0'})\n"
        "try:\n    preflight(spec)\nexcept SpecError:\n    pass\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(__import__("pathlib").Path(__file__).resolve().parents[4]),
    )
    assert out.stdout.strip() == "False"


SMOLLM2 = SYNTHETIC_ARCHITECTURES["smollm2-135m"]  # hidden 576, intermediate 1536, 9 heads, 3 KV heads


def test_gptq_group_size_must_tile_the_linear_inputs():
    problem = shape_problems(TransformersRecipe(quantization="gptq"), SMOLLM2, "cpu")
    assert problem == [
        "gptq_group_size 128 does not divide this model's Linear input sizes 576, 1536; "
        "pick 64 or 32 (or -1 for one group per column)"
    ]
    for group in (64, 32, -1):
        assert shape_problems(TransformersRecipe(quantization="gptq", gptq_group_size=group), SMOLLM2, "cpu") == []
    assert shape_problems(TransformersRecipe(quantization="gptq"), SYNTHETIC_ARCHITECTURES["llama-3-8b"], "cpu") == []
    assert shape_problems(TransformersRecipe(quantization="gptq"), None, "cpu") == []  # unknown until it loads


def test_tensor_parallel_ranks_and_rules():
    tp = TransformersRecipe(tensor_parallel=True)
    assert tensor_parallel_world_size(tp, "cuda:0,1,2,3") == 4
    assert tensor_parallel_world_size(tp, "cpu") == 2  # CPU default: 2 processes sharing the cores
    assert tensor_parallel_world_size(TransformersRecipe(tensor_parallel=True, tensor_parallel_ranks=3), "cpu") == 3
    assert tensor_parallel_world_size(TransformersRecipe(), "cuda:0,1") == 1
    # heads must split evenly: SmolLM2 has 9 query and 3 key/value heads
    assert "use 3 ranks" in shape_problems(tp, SMOLLM2, "cpu")[0]
    assert shape_problems(TransformersRecipe(tensor_parallel=True, tensor_parallel_ranks=3), SMOLLM2, "cpu") == []
    assert shape_problems(tp, SYNTHETIC_ARCHITECTURES["llama-3-8b"], "cuda:0,1,2,3") == []
    assert "use 3 GPUs" in shape_problems(tp, SMOLLM2, "cuda:0,1")[0]
    # offered on the CPU (with a note), refused where it cannot line up
    assert _spec({"tensor_parallel": True, "tensor_parallel_ranks": 3}).recipe.tensor_parallel
    assert any("share its cores" in n for n in notes(tp, "cpu"))
    with pytest.raises(SpecError, match="one rank per GPU"):
        _spec({"tensor_parallel": True, "tensor_parallel_ranks": 3}, "cuda:0,1")
    with pytest.raises(ValueError, match="only used with tensor_parallel"):
        TransformersRecipe(tensor_parallel_ranks=2)
    with pytest.raises(ValueError, match="not with weight quantization, torch.compile"):
        TransformersRecipe(tensor_parallel=True, quantization="gptq", cache_implementation="static", compile=True)
    with pytest.raises(SpecError, match="arrival=batch"):
        _spec({"tensor_parallel": True}, workload={"arrival": "poisson", "rate": 2})
    with pytest.raises(SpecError, match="accuracy is not measured with tensor parallelism"):
        parse_job_spec(
            {
                "model": {"source": "demo"},
                "recipe": {"engine": "transformers", "tensor_parallel": True},
                "quality": {"metrics": ["ppl"]},
            }
        )


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        ({"compile_mode": "max-autotune"}, "compile_mode is only used with compile=true"),
        ({"gptq_bits": 8}, "gptq_bits is only used with quantization=gptq"),
        ({"gptq_group_size": 64}, "gptq_group_size is only used with quantization=gptq"),
        ({"gptq_desc_act": True}, "gptq_desc_act is only used with quantization=gptq"),
        ({"gptq_calibration_file": "calib.txt"}, "gptq_calibration_file is only used with quantization=gptq"),
        ({"quantization": "torchao_int8_weight_only", "gptq_bits": 8}, "gptq_bits is only used with quantization=gptq"),
        ({"num_speculative_tokens": 4}, "num_speculative_tokens is only used with speculative="),
        ({"prompt_lookup_ngram": 2}, "prompt_lookup_ngram is only used with speculative=prompt_lookup"),
        (
            {"speculative": "assistant", "assistant_model": "demo", "prompt_lookup_ngram": 2},
            "prompt_lookup_ngram is only used with speculative=prompt_lookup",
        ),
        ({"drop_layers_from": "end"}, "drop_layers_from is only used with drop_layers > 0"),
    ],
)
def test_a_transformers_knob_that_would_be_ignored_is_refused(recipe, message):
    with pytest.raises(SpecError) as exc:
        _spec(recipe)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    "recipe",
    [
        {"cache_implementation": "static", "compile": True, "compile_mode": "max-autotune"},
        {"quantization": "gptq", "gptq_bits": 8, "gptq_group_size": 64, "gptq_desc_act": True},
        {"speculative": "prompt_lookup", "prompt_lookup_ngram": 2, "num_speculative_tokens": 4},
        {"speculative": "early_exit", "early_exit_layer": 4, "num_speculative_tokens": 4},
        {"drop_layers": 2, "drop_layers_from": "end"},
    ],
)
def test_transformers_knobs_with_their_enabler_are_accepted(recipe):
    assert _spec(recipe)


def _vllm(recipe: dict, device: str = "cpu", engine: str = "vllm"):
    return parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": engine, **recipe}, "device": device})


@pytest.mark.parametrize("engine", ["vllm", "vllm-server"])
@pytest.mark.parametrize(
    ("recipe", "device", "message"),
    [
        ({"prompt_lookup_min": 1}, "cpu", "prompt_lookup_min is only used with speculative=ngram"),
        (
            {"speculative": "draft", "speculative_model": "demo", "prompt_lookup_max": 6},
            "cpu",
            "prompt_lookup_max is only used with speculative=ngram",
        ),
        ({"num_speculative_tokens": 5}, "cpu", "num_speculative_tokens is only used with speculative="),
        ({"speculative_model": "demo"}, "cpu", "speculative_model is only used with speculative=draft"),
        ({"gpu_memory_utilization": 0.5}, "cpu", "gpu_memory_utilization is only used on a GPU"),
        ({"cpu_kvcache_space_gib": 4}, "cuda:0", "cpu_kvcache_space_gib is only used on the CPU"),
    ],
)
def test_a_vllm_knob_that_would_be_ignored_is_refused(recipe, device, message, engine):
    with pytest.raises(SpecError) as exc:
        _vllm(recipe, device, engine)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    ("recipe", "device"),
    [
        ({"speculative": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 6, "num_speculative_tokens": 5}, "cpu"),
        ({"gpu_memory_utilization": 0.5}, "cuda:0"),
        ({"cpu_kvcache_space_gib": 4}, "cpu"),
    ],
)
def test_vllm_knobs_with_their_enabler_are_accepted(recipe, device):
    assert _vllm(recipe, device)
