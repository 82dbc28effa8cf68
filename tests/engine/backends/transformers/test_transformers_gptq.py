"""GPTQ through gptqmodel on the CPU: a real quantization of the demo model, built once.

The build goes to a temporary cache folder (the quantized demo model is ~130 MB) and is
calibrated on a short text, so it takes about a minute on two cores.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def gptq_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from engine.settings import get_settings

    monkeypatch.setenv("LATENCYLAB_CACHE_PATH", str(tmp_path / "cache"))
    get_settings.cache_clear()
    yield tmp_path / "cache"
    get_settings.cache_clear()


def test_gptq_quantizes_once_and_runs(demo_folder: Path, gptq_cache: Path, tmp_path: Path, db) -> None:
    pytest.importorskip("gptqmodel")
    from engine.run.runner import ProgressState, run_benchmark
    from engine.spec import parse_job_spec

    calibration = tmp_path / "calibration.txt"
    calibration.write_text(
        "Paris is the capital of France. The river Seine flows through the city, past the Louvre "
        "and the cathedral of Notre-Dame. Python is a programming language that lets you work "
        "quickly and integrate systems more effectively. " * 3
    )
    spec = parse_job_spec(
        {
            "model": {"source": str(demo_folder)},  # a local folder: the demo conversion stays cached
            "recipe": {
                "engine": "transformers",
                "quantization": "gptq",
                "gptq_bits": 4,
                "gptq_group_size": 64,
                "gptq_calibration_file": str(calibration),
            },
            "workload": {"prompt_tokens": 16, "output_tokens": 6, "requests": 2},
            "quality": {"metrics": ["ppl"], "budget_tokens": 512},
        }
    )
    first = run_benchmark(spec, db, ProgressState(), log=lambda _m: None)
    applied = first.provenance["applied"]
    assert applied["quantization"] == "gptq" and applied["gptq_cached"] is False
    assert applied["gptq_bits"] == 4 and applied["gptq_group_size"] == 64
    assert applied["gptq_calibration"] == str(calibration)
    assert first.quality["calibration"] == str(calibration)  # recorded beside the figures it may flatter
    folder = gptq_cache / "gptq" / applied["gptq_cache_key"]
    assert (folder / ".complete").is_file() and (folder / "config.json").is_file()
    measured = [r for r in first.requests if not r.warmup]
    assert [r.output_tokens for r in measured] == [6, 6]
    ppl = first.quality["perplexity"]
    # float32 scores ~20 on this corpus; 4-bit weights calibrated on three sentences cost some
    # of that, not all of it (a broken quantization scores in the thousands)
    assert math.isfinite(ppl) and ppl < 100, ppl

    again = run_benchmark(spec, db, ProgressState(), log=lambda _m: None)
    assert again.provenance["applied"]["gptq_cached"] is True  # built once, by fingerprint
    assert again.provenance["applied"]["gptq_cache_key"] == applied["gptq_cache_key"]
