"""Helpers of the study tests: a small study definition, and a worker's part played by hand
(claim a trial's job, store its run with chosen figures, end the job)."""

from __future__ import annotations

from typing import Any

from engine.optimize.study import StudyDefinition, parse_definition
from storage import jobs, studies
from storage.runs import NewRun, save_run

TINY = {"prompt_tokens": 16, "output_tokens": 8, "requests": 2}


def definition(**overrides: Any) -> StudyDefinition:
    data: dict[str, Any] = {
        "name": "s1",
        "base": {"model": {"source": "demo"}, "workload": TINY, "quality": {"budget_tokens": 128}},
        "objectives": ["tpot_p50"],
        "constraints": {"max_ppl_increase_pct": 2.0},
        "budget": {"trials": 3},
        "knobs": ["dtype", "quantization"],
        "values": {"dtype": ["float32", "bfloat16"], "quantization": ["none", "torch_dynamic_int8"]},
    }
    data.update(overrides)
    return parse_definition(data)


def create(db: Any, **overrides: Any) -> Any:
    d = definition(**overrides)
    return studies.create_study(db, d.name, d.model_dump(mode="json"), submitted_by="test")


def run_job(db: Any, job_id: int, tpot: float, ppl: float | None = 20.0, worker: str = "w1") -> int:
    """Play the worker: claim ``job_id`` (the only queued one), store a done run with these figures, end it."""
    job = jobs.claim(db, worker, ["cpu"])
    assert job is not None and job.id == job_id
    jobs.mark_started(db, job_id, worker)
    quality = None if ppl is None else {"perplexity": ppl, "perplexity_tokens": 127}
    metrics = {
        "tpot_ms": {"p50": tpot},
        "ttft_ms": {"p50": 2 * tpot, "p99": 3 * tpot},
        "output_tokens_per_s": 1000 / tpot,
    }
    run_id = save_run(
        db,
        NewRun(
            status="done",
            spec=job.spec,
            fingerprint=job.fingerprint,
            model="demo",
            engine="transformers",
            device="cpu",
            metrics=metrics,
            quality=quality,
            job_id=job_id,
            worker_id=worker,
        ),
    )
    jobs.finish(db, job_id, worker, "done")
    return run_id
