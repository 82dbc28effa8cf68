"""What a prediction says about where its costs came from: calibrated here, carried to other hardware by
roofline, or uncalibrated with no band; and which stored runs a calibration takes."""

from __future__ import annotations

import pytest
from predict_seed import CPU, TRUE, calibration_runs, spec

from engine.whatif.hardware import get_hardware
from engine.whatif.predict.calibration import GroupFit, calibrated, calibration_for, uncalibrated
from engine.whatif.predict.deployment import NotModelled, Terms, deployment, recipe_terms, vllm_batch_defaults
from engine.whatif.predict.fitting import ServingBand, prior_costs
from engine.whatif.predict.run import PredictError, new_run, predict, prepare
from engine.whatif.shapes import model_shape

H100 = get_hardware("h100-sxm")
BAND = ServingBand({"ttft_p50": 8.0, "tpot_p50": 3.0, "e2el_p90": 6.0, "throughput": 2.0}, 3)
TERMS = Terms("vllm", "fp32", "fp32")


def _fit(band: ServingBand | None = BAND, runs: int = 3) -> GroupFit:
    return GroupFit(TERMS, CPU, TRUE, prior_costs("vllm", "cpu"), list(range(1, runs + 1)), band)


def test_on_its_own_hardware_the_label_names_the_runs_and_the_band():
    cal = calibrated(_fit(), CPU)
    assert not cal.carried and cal.calibrated and cal.band is BAND
    assert cal.label == (
        "calibrated from 3 runs on Test CPU (local, measured); "
        "LOO median error TTFT p50 ±8 %, TPOT p50 ±3 %, E2E p90 ±6 %, throughput ±2 % (3 runs)"
    )


def test_carried_to_other_hardware_the_label_says_so_and_whose_band_it_is():
    cal = calibrated(_fit(), H100)
    assert cal.carried and cal.costs is TRUE
    assert cal.label.startswith(
        "calibrated from 3 runs on Test CPU (local, measured), carried to NVIDIA H100 SXM 80GB by roofline"
    )
    assert "host overheads measured on a cpu, not a gpu" in cal.label
    assert cal.label.endswith("(3 runs) on Test CPU (local, measured)")
    assert cal.to_dict()["calibration_hardware"] == "local:cpu" and cal.to_dict()["carried"] is True


def test_one_run_claims_no_band_and_no_run_is_the_uncalibrated_roofline():
    assert (
        calibrated(_fit(None, 1), CPU).label == "calibrated from 1 run on Test CPU (local, measured); one run: no band"
    )
    cal = uncalibrated(TERMS, H100)
    assert cal.band is None and not cal.calibrated and cal.costs == prior_costs("vllm", "gpu")
    assert cal.label.startswith("uncalibrated: no measured vllm run") and "no error band claimed" in cal.label
    assert calibration_for(None, TERMS, H100).label == cal.label


def test_recipes_in_calibration_terms():
    assert recipe_terms({"engine": "vllm-server"}, "cpu") == Terms("vllm", "fp32", "fp32")
    assert recipe_terms({"engine": "vllm", "kv_cache_dtype": "fp8", "speculative": "ngram"}, "gpu") == Terms(
        "vllm", "bf16", "fp8", "kv fp8", "ngram"
    )
    assert recipe_terms({"engine": "transformers"}, "cpu").family == "transformers"
    with pytest.raises(NotModelled, match="serving simulator models"):
        recipe_terms({"engine": "openai"}, "cpu")
    with pytest.raises(NotModelled, match="continuous batching"):
        recipe_terms({"engine": "transformers", "batching": "continuous"}, "cpu")


def test_the_server_a_recipe_makes():
    assert vllm_batch_defaults(CPU, server=True, tp=1) == (2048, 128)
    assert vllm_batch_defaults(H100, server=True, tp=1) == (8192, 1024)
    assert vllm_batch_defaults(get_hardware("a100-80gb"), server=True, tp=1) == (2048, 256)
    assert vllm_batch_defaults(H100, server=False, tp=1) == (2048, 128)
    shape = model_shape("synthetic:smollm2-135m")
    job = spec({"requests": 4}, cpu_kvcache_space_gib=2, max_num_batched_tokens=512, enable_prefix_caching="off")
    config = deployment(job, CPU, shape).config
    assert (config.block_size, config.kv_cache_bytes, config.max_num_batched_tokens) == (128, 2 * 1024**3, 512)
    assert config.prefix_caching is False and config.chunked_prefill is True and config.max_num_seqs == 128
    static = deployment(spec({"requests": 4, "arrival": "poisson", "rate": 1.0}, engine="transformers"), CPU, shape)
    assert static.config.static_batches and static.config.max_num_seqs == 1 and static.blocking_client


def test_a_prediction_is_a_predicted_run_with_its_hardware_and_label():
    job = spec({"requests": 12, "arrival": "poisson", "rate": 4.0}, model="synthetic:llama-3.2-1b")
    setup = prepare(job, H100, tp=2)
    cal = calibrated(_fit(), H100)
    p = predict(setup, cal)
    run = new_run(p)
    assert run.predicted and run.device == "h100-sxm" and run.device_name == "2 x " + H100.name
    prediction = run.provenance["prediction"]
    assert prediction["tp"] == 2 and prediction["label"] == cal.label and prediction["band"]["n_runs"] == 3
    assert len(run.requests) == 12 and run.metrics["ttft_ms"]["p50"] > 0 and "aggregates" in run.series


def test_what_does_not_fit_is_one_line_before_anything_runs():
    big = spec({"requests": 2}, model="synthetic:llama-3-8b", dtype="float32")
    with pytest.raises(
        PredictError, match=r"^weights of 32.1 GB per device do not fit .*'s 24 GB at tensor parallel 1$"
    ):
        prepare(big, get_hardware("rtx-4090"))
    long = spec({"requests": 1, "prompt_tokens": 20_000}, model="synthetic:llama-3.2-1b")  # 1 GiB of KV: 16,384 tokens
    with pytest.raises(
        PredictError, match=r"^request 0: a prompt of 20000 tokens .* needs 157 KV blocks of 128 tokens; "
    ):
        prepare(long, CPU)
    with pytest.raises(PredictError, match="9 attention heads, not divisible by tensor parallel 2"):
        prepare(spec({"requests": 1}), H100, tp=2)
    with pytest.raises(PredictError, match="tensor parallelism of the transformers engine"):
        prepare(spec({"requests": 1}, engine="transformers"), H100, tp=2)


def test_calibration_runs_cover_two_load_kinds():
    assert {p.observed.spec.workload.arrival for p in calibration_runs()} == {"concurrency", "poisson"}
