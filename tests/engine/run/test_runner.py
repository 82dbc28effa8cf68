"""A whole benchmark through the runner: stored with raw stamps, or stored as failed."""

from __future__ import annotations

import json

import pytest

from engine.run.runner import BenchmarkFailed, preflight, run_benchmark
from engine.spec import SpecError, parse_job_spec
from storage.runs import count_runs, get_requests, get_run

pytestmark = pytest.mark.slow


def test_demo_run_is_stored_with_raw_stamps(demo_run):
    db, run_id = demo_run
    run = get_run(db, run_id)
    assert run.status == "done" and run.name == "demo fixture"
    m = run.metrics
    assert m["completed"] == 4 and m["failed"] == 0 and m["warmup_excluded"] == 2
    assert m["total_output_tokens"] == 32
    assert 0 < m["ttft_ms"]["p50"] < m["e2el_ms"]["p50"]
    assert m["tpot_ms"]["p50"] > 0 and m["output_tokens_per_s"] > 0
    assert m["peak_memory_bytes"] > 100_000_000 and m["load_s"] > 0
    reqs = get_requests(db, run_id)
    assert len(reqs) == 6 and sum(r.warmup for r in reqs) == 2
    assert all(len(r.chunk_ns) == 8 for r in reqs)
    prov = run.provenance
    assert prov["packages"]["torch"] and prov["cpu"] and prov["torch_threads"] >= 1
    assert prov["applied"]["dtype"] == "float32"


def test_prompt_longer_than_context_is_refused_before_storing(db):
    spec = parse_job_spec({"model": {"source": "demo"}, "workload": {"prompt_tokens": 9000, "output_tokens": 4}})
    with pytest.raises(SpecError, match="exceed the model's context of 8192"):
        run_benchmark(spec, db=db)
    assert count_runs(db) == 0


def test_failure_half_way_is_stored_as_failed(db, tmp_path):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 128}))
    spec = parse_job_spec({"model": {"source": str(broken)}, "workload": {"prompt_tokens": 8, "output_tokens": 2}})
    preflight(spec)  # the folder looks like a model
    with pytest.raises(BenchmarkFailed) as exc:
        run_benchmark(spec, db=db, log=lambda _m: None)
    run = get_run(db, exc.value.run_id)
    assert run.status == "failed" and run.error and run.metrics is None
    assert "\n" not in run.error and "could not load" in run.error
    assert get_requests(db, run.id) == []


def test_prompt_file_workload(db, tmp_path, demo_folder):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "Hello!"}\nWhat is the capital of France, and why is it there?\n')
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {
                "prompt_tokens": None,
                "prompt_file": str(prompts),
                "output_tokens": 3,
                "requests": 2,
                "batch_size": 2,
                "warmup_requests": 0,
            },
        }
    )
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    reqs = get_requests(db, result.run_id)
    assert len(reqs) == 2 and reqs[0].prompt_tokens < reqs[1].prompt_tokens  # the file's two prompts, in order
    assert all(r.output_tokens == 3 for r in reqs)


def test_tokens_per_second_per_gpu():
    from engine.run.runner import per_gpu

    assert per_gpu(100.0, "cpu") is None
    assert per_gpu(100.0, "cuda:0") == 100.0
    assert per_gpu(100.0, "cuda:0,1,2,3") == 25.0
    assert per_gpu(None, "cuda:0") is None
