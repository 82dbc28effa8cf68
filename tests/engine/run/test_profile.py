"""The profile phase: after the measured phase, on the demo model on the CPU; and where it does not apply."""

from __future__ import annotations

import gzip
import json

import pytest

from engine.run.profile import profile_phase, trace_path, unavailable_reason
from engine.spec import SpecError, parse_job_spec


def _spec(**workload: object) -> object:
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, **workload},
        }
    )


def test_profile_steps_leave_the_fingerprint_alone() -> None:
    assert _spec(profile_steps=20).fingerprint() == _spec().fingerprint()  # a profile runs after the figures
    with pytest.raises(SpecError, match="profile_steps"):
        _spec(profile_steps=-1)


def test_engines_that_cannot_be_profiled_say_so_once() -> None:
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "openai", "base_url": "http://127.0.0.1:9/v1", "model_name": "m"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, "profile_steps": 5},
        }
    )
    said: list[str] = []
    got = profile_phase(spec, backend=None, prompts=[[1, 2]], state=None, log=said.append)
    assert said == ["profiling not available for openai"]
    assert got == {
        "profile": {
            "steps": 5,
            "available": False,
            "note": "profiling not available for openai",
            "activities": [],
            "top": [],
        }
    }
    assert profile_phase(_spec(), backend=None, prompts=[], state=None, log=said.append) == {}
    assert unavailable_reason(_spec(profile_steps=5)) is None


def test_a_job_in_its_profile_phase_keeps_its_progress() -> None:
    from engine.jobs.job_process import overall_fraction

    assert overall_fraction("profiling", None) == overall_fraction("measuring", 1.0)  # not back to 0 %


def test_trace_files_go_under_the_data_folder(tmp_path) -> None:
    path = trace_path("abcd1234", tmp_path)
    assert path.parent == tmp_path / "profiles"
    assert path.name.startswith("abcd1234-") and path.name.endswith(".json.gz")


@pytest.mark.slow
def test_a_demo_run_with_a_profile_phase(db) -> None:
    from engine.run.runner import run_benchmark
    from engine.settings import get_settings
    from storage.series import get_series

    said: list[str] = []
    result = run_benchmark(_spec(profile_steps=5), db=db, log=said.append)
    record = get_series(db, result.run_id, "profile")
    assert record is not None and record["available"] is True
    assert record["steps"] == 5 and record["activities"] == ["cpu"] and record["batch_size"] == 1
    top = record["top"]
    assert top and all(row["self_ms"] > 0 and row["calls"] >= 0 for row in top)
    assert all(0 < row["share_pct"] <= 100 for row in top) and sum(r["share_pct"] for r in top) <= 100.0 + 1e-6
    assert any(row["name"] == "aten::mm" or row["name"].startswith("aten::") for row in top[:5])
    with gzip.open(record["trace_file"], "rt") as fh:
        trace = json.load(fh)
    assert trace["traceEvents"]
    assert str(get_settings().data_dir / "profiles") in record["trace_file"]
    assert any(line.startswith("profile: 5 decode steps") for line in said)
    # the measured phase is untouched: its requests are the workload's, none from the profile
    assert len([r for r in result.requests if not r.warmup]) == 2


@pytest.mark.gpu
def test_a_gpu_run_profiles_cuda_kernels(db) -> None:
    from engine.run.runner import run_benchmark
    from storage.series import get_series

    spec = parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "recipe": {"engine": "transformers", "dtype": "bfloat16"},
            "device": "cuda:0",
            "workload": {"prompt_tokens": 64, "output_tokens": 8, "requests": 2, "profile_steps": 5},
        }
    )
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    record = get_series(db, result.run_id, "profile")
    assert record["activities"] == ["cpu", "cuda"] and record["top"]
    assert all(0 < row["share_pct"] <= 100 for row in record["top"])  # ranked by device self time
