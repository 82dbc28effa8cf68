"""The calibration micro-benchmark on this CPU, at tiny sizes."""

from __future__ import annotations

import pytest

from engine.whatif.microbench import run_microbench, store


def test_cpu_microbench_is_fast_and_positive(db):
    result = run_microbench("cpu", copy_mb=4, matmul_n=96, repeats=2)
    assert result.device == "cpu" and result.device_name
    assert result.copy_gbs > 0.1 and result.matmul_tflops["fp32"] > 1e-4
    assert set(result.matmul_tflops) == {"fp32", "bf16"}
    assert result.duration_s < 10 and result.memory_bytes and result.threads
    from storage.hardware import list_measurements

    mid = store(db, result)
    (saved,) = list_measurements(db)
    assert saved.id == mid and saved.copy_gbs == result.copy_gbs and saved.matmul_tflops == result.matmul_tflops


@pytest.mark.parametrize("device", ["tpu:0", "cuda:99"])
def test_bad_device(device):
    with pytest.raises(ValueError):
        run_microbench(device, copy_mb=1, matmul_n=32, repeats=1)
