"""Every CPU-runnable knob through the real runner on the demo model (tiny workloads).

Each test runs load -> warm-up -> measure with 16 prompt tokens and 6 output tokens and
checks that the knob was really applied (LoadReport.applied -> provenance) and that
every measured request got its tokens. CUDA knobs are marked ``gpu``.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def _run(
    recipe: dict,
    device: str = "cpu",
    requests: int = 2,
    batch_size: int = 1,
    output_tokens: int = 6,
    model: str = "demo",
):
    from engine.run.runner import ProgressState, execute, preflight
    from engine.spec import parse_job_spec

    spec = parse_job_spec(
        {
            "model": {"source": model},
            "recipe": {"engine": "transformers", **recipe},
            "device": device,
            "workload": {
                "prompt_tokens": 16,
                "output_tokens": output_tokens,
                "requests": requests,
                "batch_size": batch_size,
            },
        }
    )
    preflight(spec)
    result = execute(spec, ProgressState(), log=lambda _m: None)
    measured = [r for r in result.requests if not r.warmup]
    assert len(measured) == requests
    assert all(r.output_tokens == output_tokens for r in measured), [r.output_tokens for r in measured]
    assert result.metrics["warmup_s"] > 0
    return result


@pytest.mark.parametrize(
    "recipe, expect",
    [
        ({}, {"quantization": "none", "cache_implementation": "dynamic", "dtype": "float32"}),
        ({"dtype": "bfloat16"}, {"dtype": "bfloat16"}),
        ({"attn_implementation": "eager"}, {"attn_implementation": "eager"}),
        (
            {"quantization": "torchao_int8_weight_only"},
            {"quantization": "torchao_int8_weight_only", "quantized_linears": 210},
        ),
        ({"quantization": "torchao_int8_dynamic"}, {"quantization": "torchao_int8_dynamic"}),
        ({"quantization": "torch_dynamic_int8"}, {"quantization": "torch_dynamic_int8"}),
        ({"cache_implementation": "static"}, {"cache_implementation": "static", "compile": False}),
        (
            {"kv_cache_quantization": "quanto_int4"},
            {"cache_implementation": "quantized", "kv_cache_quantization": "quanto_int4"},
        ),
        (
            {"kv_cache_quantization": "hqq_int4"},
            {"cache_implementation": "quantized", "kv_cache_quantization": "hqq_int4", "hqq": "0.2.8.post1"},
        ),
        (
            {"drop_layers": 6, "drop_layers_from": "end"},
            {"dropped_layers": [24, 25, 26, 27, 28, 29], "num_hidden_layers": 24},
        ),
    ],
)
def test_cpu_knob_is_applied_and_recorded(demo_folder, recipe, expect):
    if recipe.get("kv_cache_quantization", "none").startswith("quanto"):
        pytest.importorskip("optimum.quanto")
    result = _run(recipe)
    applied = result.provenance["applied"]
    for key, value in expect.items():
        assert applied[key] == value, (key, applied)
    assert applied["recipe"]


def test_int8_weights_show_their_saving_and_peak_memory_is_the_measured_phase(demo_folder):
    """Issue 13.6: weights memory as loaded (after quantization), and a peak without the float32 load."""
    cpu_kind = "cpu: sampled RSS of the job's process tree during the measured phase"
    full = _run({}).metrics
    int8 = _run({"quantization": "torchao_int8_weight_only"}).metrics
    # float32: 134.5M parameters x 4 bytes; int8 Linear layers (the tied float32 embedding stays)
    assert full["weights_memory_bytes"] > 500 * 2**20
    assert int8["weights_memory_bytes"] < 0.5 * full["weights_memory_bytes"]
    # the float32 weights read before quantizing are gone by the measured phase
    assert int8["peak_memory_bytes"] < full["peak_memory_bytes"] - 150 * 2**20
    assert full["peak_memory_kind"] == int8["peak_memory_kind"] == cpu_kind


def test_prompt_lookup_records_acceptance(demo_folder):
    result = _run({"speculative": "prompt_lookup", "prompt_lookup_ngram": 2, "num_speculative_tokens": 4})
    spec = result.provenance["speculation"]
    assert result.provenance["applied"]["speculative"] == "prompt_lookup"
    assert spec["steps"] > 0 and 0 <= spec["accepted"] <= spec["proposed"]


def test_assistant_model_of_the_same_weights_accepts_every_draft(demo_folder):
    # The demo model drafting for itself: a greedy draft always matches, a strong end-to-end check.
    result = _run({"speculative": "assistant", "assistant_model": "demo", "num_speculative_tokens": 3})
    spec = result.provenance["speculation"]
    assert spec["proposed"] > 0 and spec["acceptance_rate"] == 1.0
    chunks = [n for r in result.requests if not r.warmup for n in r.chunk_tokens]
    assert max(chunks) > 1  # several tokens per chunk


def test_self_speculative_early_exit(demo_folder):
    result = _run({"speculative": "early_exit", "early_exit_layer": 20, "num_speculative_tokens": 3})
    assert result.provenance["applied"]["early_exit_layer"] == 20
    assert result.provenance["speculation"]["steps"] > 0


def test_continuous_batching(demo_folder):
    result = _run({"batching": "continuous"}, requests=4, batch_size=2)
    applied = result.provenance["applied"]
    assert applied["batching"] == "continuous" and "continuous_batching" in applied


def test_static_batch_of_two(demo_folder):
    _run({"quantization": "torch_dynamic_int8"}, requests=2, batch_size=2)


def test_cpu_threads_apply_to_the_run_only(demo_folder):
    import torch

    before = torch.get_num_threads()
    result = _run({"cpu_threads": 1})
    assert result.provenance["applied"]["cpu_threads"] == 1
    assert result.provenance["torch_threads"] == 1  # what the measurement ran with
    assert result.provenance["applied"]["recipe"].endswith("1 CPU thread")
    assert torch.get_num_threads() == before  # the process's own count is back


def test_gptq_without_the_package_says_how_to_install(demo_folder, monkeypatch):
    from engine.backends.transformers import preflight as pre
    from engine.run.runner import preflight
    from engine.spec import SpecError, parse_job_spec

    monkeypatch.setattr(pre, "probe", lambda device: pre.DeviceFacts())  # nothing installed
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "transformers", "quantization": "gptq", "gptq_group_size": 64},
        }
    )
    with pytest.raises(SpecError, match="pip install gptqmodel==7.6.0 optimum==2.3.0"):
        preflight(spec)


def test_stored_run_keeps_what_was_applied(demo_folder, db):
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec
    from storage.runs import get_run

    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "transformers", "quantization": "torch_dynamic_int8"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 1},
        }
    )
    result = run_benchmark(spec, db, log=lambda _m: None)
    run = get_run(db, result.run_id)
    assert run.provenance["applied"]["quantization"] == "torch_dynamic_int8"
    assert run.spec["recipe"]["quantization"] == "torch_dynamic_int8"


def test_compile_with_static_cache_excludes_warmup(demo_folder):
    """~45-90 s cold on this CPU: the compilation lands in warmup_s, not in the measured TTFT."""
    result = _run({"cache_implementation": "static", "compile": True}, requests=2, output_tokens=4)
    assert result.provenance["applied"]["compile"] is True
    assert result.metrics["warmup_s"] * 1000 > 5 * result.metrics["ttft_ms"]["p99"]


# -- CUDA ------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize(
    "recipe",
    [
        {"quantization": "bnb_nf4"},
        {"quantization": "bnb_int8"},
        {"quantization": "torchao_int4_weight_only", "dtype": "bfloat16"},
        {"quantization": "torchao_float8"},
        {"quantization": "torchao_int8_weight_only"},
        {"cache_implementation": "static", "compile": True, "compile_mode": "reduce-overhead"},
        {"dtype": "float16"},
    ],
)
def test_cuda_knob_on_demo(demo_folder, recipe):
    import torch

    if recipe.get("quantization") == "torchao_float8" and torch.cuda.get_device_capability(0) < (8, 9):
        pytest.skip("float8 needs compute capability >= 8.9")
    result = _run(recipe, device="cuda:0")
    assert result.provenance["applied"]["quantization"] == recipe.get("quantization", "none")


@pytest.mark.gpu
def test_gptq_on_cuda(demo_folder, tmp_path):
    """GPTQ built on the GPU (gptqmodel picks a CUDA kernel), calibrated on a short text."""
    pytest.importorskip("gptqmodel")
    text = tmp_path / "calibration.txt"
    text.write_text("Paris is the capital of France. The Seine flows through it. " * 20)
    recipe = {"quantization": "gptq", "gptq_group_size": 64, "gptq_calibration_file": str(text)}
    result = _run(recipe, device="cuda:0", model=str(demo_folder))
    assert result.provenance["applied"]["quantization"] == "gptq"


@pytest.mark.gpu
def test_tensor_parallel_over_three_gpus(demo_folder):
    """One process per GPU over NCCL (the demo model's 9 heads split over 3 GPUs, not 2)."""
    import torch

    if torch.cuda.device_count() < 3:
        pytest.skip("the demo model's 9 heads split over 3 GPUs; this machine has fewer")
    result = _run({"tensor_parallel": True}, device="cuda:0,1,2")
    assert result.provenance["applied"]["tensor_parallel"] == "tp_plan=auto over 3 ranks"
