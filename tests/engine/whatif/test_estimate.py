"""What-if arithmetic against hand-worked cases."""

from __future__ import annotations

import pytest
from whatif_seed import CPU

from engine.whatif.estimate import (
    EstimateError,
    EstimateRecipe,
    EstimateWorkload,
    Factors,
    estimate,
    kv_bytes_per_token_per_gpu,
    largest_fit,
    memory,
    model_shape,
    weights_bytes,
)
from engine.whatif.hardware import CATALOG, Hardware

IDEAL = Factors(1.0, 1.0, 1.0, 0.0, 0.0)
LLAMA8 = model_shape("synthetic:llama-3-8b")


def test_llama3_8b_weights_and_kv_per_token():
    assert LLAMA8.params == 8_030_261_248
    assert round(weights_bytes(LLAMA8, "bf16") / 1e9, 2) == 16.06
    assert round(weights_bytes(LLAMA8, "int4") / 1e9, 2) == 4.02
    # 2 (K, V) x 32 layers x 8 kv heads x 128 head_dim x 2 bytes
    assert LLAMA8.kv_bytes_per_token(2) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert kv_bytes_per_token_per_gpu(LLAMA8, "fp8", 1) == 65_536
    assert kv_bytes_per_token_per_gpu(LLAMA8, "bf16", 2) == 65_536
    assert kv_bytes_per_token_per_gpu(LLAMA8, "bf16", 16) == 2 * 32 * 1 * 128 * 2  # 8 kv heads replicated


def test_smollm2_shape_matches_the_demo():
    demo = model_shape("demo")
    assert demo.params == 134_515_008 and demo.layers == 30 and demo.head_dim == 64
    assert demo.kv_bytes_per_token(4) == 2 * 30 * 3 * 64 * 4


def test_decode_is_weights_plus_kv_over_bandwidth():
    hw = CATALOG["h100-sxm"]
    est = estimate(
        LLAMA8,
        hw,
        EstimateRecipe(engine="ideal", dtype="bf16"),
        EstimateWorkload(prompt_tokens=128, output_tokens=32),
        factors=IDEAL,
    )
    embed = 128_256 * 4096 * 2  # untied input embedding is gathered, not streamed
    ctx = 128 + 32 / 2
    expected_s = (16_060_522_496 - embed + ctx * 131_072) / 3.35e12
    assert est.tpot_ms == pytest.approx(expected_s * 1e3, rel=1e-9)
    assert est.decode_bound == "memory"
    assert est.tokens_per_s_per_user == pytest.approx(1 / expected_s)


def test_prefill_is_compute_bound_flops_over_peak():
    hw = CATALOG["a100-80gb"]
    p = 2048
    est = estimate(
        LLAMA8,
        hw,
        EstimateRecipe(engine="ideal", dtype="bf16"),
        EstimateWorkload(prompt_tokens=p, output_tokens=2),
        factors=IDEAL,
    )
    linear = LLAMA8.linear_params
    flops = 2 * linear * p + 4 * 32 * 4096 * p * (p + 1) / 2 + 2 * 128_256 * 4096
    assert est.prefill_bound == "compute"
    assert est.ttft_ms == pytest.approx(flops / 312e12 * 1e3, rel=1e-9)


def test_engine_overhead_keeps_launch_bound_engines_slower():
    wl = EstimateWorkload(prompt_tokens=128, output_tokens=32)
    hw = CATALOG["h100-sxm"]
    eager = estimate(LLAMA8, hw, EstimateRecipe(engine="transformers", dtype="bf16"), wl)
    fused = estimate(LLAMA8, hw, EstimateRecipe(engine="vllm", dtype="bf16"), wl)
    assert eager.tpot_ms > fused.tpot_ms + 40
    assert eager.calibration == "uncalibrated" and eager.decode_bound == "overhead"


def test_memory_fit_and_tensor_parallel_split():
    big = model_shape("synthetic:llama-3-70b")
    wl_args = (128, 32)
    one = memory(big, CATALOG["a100-80gb"], EstimateRecipe(dtype="bf16"), *wl_args)
    assert round(one.weights / 1e9, 1) == 141.1 and not one.fits
    two = memory(big, CATALOG["a100-80gb"], EstimateRecipe(dtype="bf16", tp=2), *wl_args)
    assert two.weights == pytest.approx(one.weights / 2) and two.fits
    assert two.usable == pytest.approx(80e9 * 0.95)
    est = estimate(big, CATALOG["a100-80gb"], EstimateRecipe(dtype="bf16"), EstimateWorkload(*wl_args))
    assert not est.fits and any("does not fit" in n for n in est.notes) and est.max_batch == 0


def test_largest_batch_and_context_by_hand():
    hw = Hardware(key="t", name="t", vendor="t", kind="gpu", memory_gb=24, bandwidth_gbs=1000, tflops={"bf16": 100.0})
    recipe = EstimateRecipe(dtype="bf16", batch_size=2)
    max_batch, max_ctx = largest_fit(LLAMA8, hw, recipe, 1000, 1000)
    free = 24e9 * 0.95 - 16_060_522_496 - 1e9
    act_tok = (3 * 4096 + 2 * 14336) * 2
    per_seq = 2000 * 131_072 + 1000 * act_tok + 128_256 * 4
    assert max_batch == int(free // per_seq)
    assert max_ctx == min(8192, int((free - 2 * 128_256 * 4) // (2 * (131_072 + act_tok))))
    fits = memory(LLAMA8, hw, EstimateRecipe(dtype="bf16", batch_size=max_batch), 1000, 1000)
    over = memory(LLAMA8, hw, EstimateRecipe(dtype="bf16", batch_size=max_batch + 1), 1000, 1000)
    assert fits.fits and not over.fits


def test_sliding_window_caps_kv_cache():
    mistral = model_shape("synthetic:mistral-7b")
    short = memory(mistral, CATALOG["h100-sxm"], EstimateRecipe(dtype="bf16"), 4000, 96)
    long = memory(mistral, CATALOG["h100-sxm"], EstimateRecipe(dtype="bf16"), 16000, 96)
    assert short.kv_total == long.kv_total == 4096 * mistral.kv_bytes_per_token(2)


def test_concurrency_beyond_the_batch_queues():
    hw = CATALOG["l4"]
    recipe = EstimateRecipe(engine="ideal", dtype="bf16", batch_size=4)
    one = estimate(LLAMA8, hw, recipe, EstimateWorkload(128, 32), factors=IDEAL)
    two = estimate(LLAMA8, hw, recipe, EstimateWorkload(128, 32, concurrency=8), factors=IDEAL)
    assert two.tpot_ms == pytest.approx(one.tpot_ms)
    assert two.ttft_ms == pytest.approx(one.ttft_ms + one.e2el_ms / 2)
    assert two.output_tokens_per_s == pytest.approx(one.output_tokens_per_s)


def test_precision_fallback_and_auto():
    est = estimate(LLAMA8, CATALOG["a100-80gb"], EstimateRecipe(dtype="fp8"), EstimateWorkload())
    assert est.compute_precision == "bf16" and any("no fp8 path" in n for n in est.notes)
    auto = estimate(LLAMA8, CPU, EstimateRecipe(), EstimateWorkload())
    assert (auto.weight_dtype, auto.kv_dtype) == ("fp32", "fp32")


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: EstimateRecipe(dtype="int3"), "not one of"),
        (lambda: EstimateRecipe(tp=3), "tensor parallelism"),
        (lambda: EstimateRecipe(batch_size=0), "batch size"),
        (lambda: EstimateWorkload(prompt_tokens=0), "prompt tokens"),
        (lambda: model_shape("synthetic:gpt-9"), "unknown architecture"),
        (lambda: model_shape("org/name"), "local folder with config.json"),
        (lambda: model_shape({"model_type": "mixtral", "num_local_experts": 8}), "mixture-of-experts"),
        (lambda: model_shape({"hidden_size": 64}), "config lacks"),
    ],
)
def test_bad_input_is_one_line(make, match):
    with pytest.raises(EstimateError, match=match) as err:
        make()
    assert "\n" not in str(err.value)


def test_tp_needs_an_interconnect():
    cpu = Hardware(
        key="local:cpu", name="cpu", vendor="local", kind="cpu", memory_gb=32, bandwidth_gbs=20, tflops={"fp32": 0.2}
    )
    with pytest.raises(EstimateError, match="interconnect"):
        estimate(LLAMA8, cpu, EstimateRecipe(tp=2), EstimateWorkload())


def test_local_folder_config(tmp_path):
    import json

    from engine.spec.catalog import architecture_config

    (tmp_path / "config.json").write_text(json.dumps(architecture_config("llama-3.2-1b")))
    shape = model_shape(str(tmp_path))
    assert shape.params == model_shape("synthetic:llama-3.2-1b").params and shape.head_dim == 64


def test_dropped_layers_shrink_weights_kv_and_work():
    cut = LLAMA8.dropped(8)
    per_layer = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336 + 2 * 4096
    assert cut.layers == 24 and cut.params == LLAMA8.params - 8 * per_layer
    hw = CATALOG["h100-sxm"]
    full = memory(LLAMA8, hw, EstimateRecipe(dtype="bf16"), 128, 32)
    pruned = memory(LLAMA8, hw, EstimateRecipe(dtype="bf16", drop_layers=8), 128, 32)
    assert pruned.weights == pytest.approx(cut.params * 2) and pruned.kv_per_token == full.kv_per_token * 24 / 32
    wl = EstimateWorkload(prompt_tokens=128, output_tokens=32)
    fast = estimate(LLAMA8, hw, EstimateRecipe(engine="ideal", dtype="bf16", drop_layers=8), wl, factors=IDEAL)
    assert fast.tpot_ms == pytest.approx(estimate(cut, hw, EstimateRecipe(engine="ideal", dtype="bf16"), wl).tpot_ms)
    with pytest.raises(EstimateError, match="leaves none"):
        LLAMA8.dropped(32)


def test_quantized_kv_cache_bits():
    assert kv_bytes_per_token_per_gpu(LLAMA8, "int4") == 2 * 32 * 8 * 128 * 0.5
    assert kv_bytes_per_token_per_gpu(LLAMA8, "int2") == 2 * 32 * 8 * 128 * 0.25
    assert EstimateRecipe(kv_dtype="int4").kv_dtype == "int4"
