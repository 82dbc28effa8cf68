"""The time model: on a GPU the prefill's host-side launch overhead overlaps the kernels it
launches (TTFT = max(overhead, roofline)); decode steps pay it on top; the CPU adds both.
The transformers GPU prior against the H200 figures in FIELD-NOTES.md."""

from __future__ import annotations

import pytest

from engine.whatif.estimate import EstimateRecipe, EstimateWorkload, estimate, model_shape, prior
from engine.whatif.hardware import CATALOG
from engine.whatif.roofline import Factors, Work, phase_times

F = Factors(
    eff_bandwidth=0.5, eff_compute_prefill=0.5, eff_compute_decode=0.5, step_overhead_ms=40.0, prefill_overhead_ms=20.0
)


def _work(prefill_flops: float, host_overlaps: bool) -> Work:
    # peak 1e12 FLOP/s, bandwidth 1e11 B/s; decode reads 1e9 bytes (20 ms at half the bandwidth)
    return Work(prefill_flops, 1e6, 1e6, 1e9, 0.0, 0.0, 1e12, 1e11, "bf16", host_overlaps=host_overlaps)


@pytest.mark.parametrize(
    "flops, gpu_ttft_ms, bound",
    [(5e9, 20.0, "overhead"), (50e9, 100.0, "compute")],  # 10 ms of compute hides; 100 ms does not
)
def test_gpu_prefill_overhead_overlaps_the_kernels(flops, gpu_ttft_ms, bound):
    ttft, tpot, bound_p, bound_d = phase_times(_work(flops, host_overlaps=True), F)
    assert ttft * 1e3 == pytest.approx(gpu_ttft_ms) and bound_p == bound
    assert tpot * 1e3 == pytest.approx(40.0 + 20.0) and bound_d == "overhead"  # decode: overhead + bytes


def test_cpu_adds_the_overhead_to_both_phases():
    ttft, tpot, _, _ = phase_times(_work(5e9, host_overlaps=False), F)
    assert ttft * 1e3 == pytest.approx(20.0 + 10.0) and tpot * 1e3 == pytest.approx(40.0 + 20.0)


@pytest.mark.parametrize(
    "arch, ttft_ms, tpot_ms",
    [("llama-3.2-1b", 27.0, 51.0), ("llama-3-8b", 24.0, 59.0)],  # FIELD-NOTES: H200, eager, batch 1, 512 prompt
)
def test_transformers_gpu_prior_against_the_h200_measurements(arch, ttft_ms, tpot_ms):
    est = estimate(
        model_shape(f"synthetic:{arch}"),
        CATALOG["h200"],
        EstimateRecipe(engine="transformers", dtype="bf16"),
        EstimateWorkload(prompt_tokens=512, output_tokens=32),
    )
    assert est.calibration == "uncalibrated" and est.factors == prior("transformers", "gpu")
    assert est.ttft_ms < est.tpot_ms  # as measured: one prefill pass is cheaper than an eager decode step
    assert est.ttft_ms == pytest.approx(ttft_ms, rel=0.25)
    assert est.tpot_ms == pytest.approx(tpot_ms, rel=0.1)
