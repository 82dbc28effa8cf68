"""A queued load sweep that stops at saturation: the job whose run is saturated ends its group's higher
queued points as "not run", with the reason, and leaves the stop on its run for the load curve."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from engine.jobs import job_process
from engine.jobs.saturation_stop import after_job_run
from engine.measure.saturation import Verdict
from engine.spec.sweep import build_grid, concurrency_axis, grid_specs, rate_axis
from storage import jobs
from storage.runs import NewRun, save_run
from storage.series import get_series
from tests.queue_server import one_at_a_time

SATURATED = Verdict(
    True, "in-flight requests grew 2.1/s (95 % CI 1.6–2.6) while achieved 7.9 req/s < offered 10", "open"
)
CALM = Verdict(False, "achieved 2 req/s kept up with offered 2 req/s", "open")


def _base(prompt_tokens: int = 4, url: str = "http://127.0.0.1:9/v1", requests: int = 24) -> dict:
    return {
        "model": {"source": "synthetic:smollm2-135m"},
        "recipe": {"engine": "openai", "base_url": url, "model_name": "ok"},
        "workload": {"prompt_tokens": prompt_tokens, "output_tokens": 3, "requests": requests, "warmup_requests": 0},
    }


def _queue(db, axis, sweep: str = "s", note: str | None = jobs.STOPS_AT_SATURATION, **base) -> list:
    specs = grid_specs(build_grid(_base(**base), [axis]))
    ids = jobs.submit_many(db, specs, sweep=sweep, note=note)
    return [jobs.get_job(db, i) for i in ids]


def _stored(db, job, sweep: str = "s", requests_per_s: float = 5.0) -> int:
    """A done run of ``job``'s spec in its sweep (what its process stored)."""
    from engine.spec import parse_job_spec

    spec = parse_job_spec(job.spec)
    run = NewRun(
        status="done",
        spec=job.spec,
        fingerprint=spec.fingerprint(),
        model="synthetic",
        engine="openai",
        device="cpu",
        sweep=sweep,
        metrics={"requests_per_s": requests_per_s},
    )
    return save_run(db, run)


def _result(run_id: int, verdict: Verdict | None, requests_per_s: float = 5.0) -> SimpleNamespace:
    series = {"saturation": verdict.to_dict()} if verdict else {}
    return SimpleNamespace(run_id=run_id, series=series, metrics={"requests_per_s": requests_per_s})


def test_a_saturated_point_ends_its_groups_higher_queued_points(db) -> None:
    a2, a8, a16, a32 = _queue(db, rate_axis([2, 8, 16, 32]))
    b16, b32 = _queue(db, rate_axis([16, 32]), prompt_tokens=8)  # another curve of the same sweep
    (free,) = _queue(db, rate_axis([64]), note=None)  # queued without the stop
    run_id = _stored(db, a8)
    lines: list[str] = []
    ended = after_job_run(db, a8, _result(run_id, SATURATED), lines.append)
    assert ended == [a16.id, a32.id]
    for job in (a16, a32):
        got = jobs.get_job(db, job.id)
        assert got.status == "cancelled"
        assert got.error == f"not run: saturated at 8 req/s (run {run_id}): {SATURATED.reason}"
    assert {jobs.get_job(db, j.id).status for j in (a2, b16, b32, free)} == {"queued"}
    stop = get_series(db, run_id, "sweep_stop")
    assert stop["stopped_because"] == f"saturated at 8 req/s: {SATURATED.reason}" and stop["load"] == 8.0
    assert [(p["point"], p["job_id"]) for p in stop["not_run"]] == [("rate 16/s", a16.id), ("rate 32/s", a32.id)]
    assert lines and "not run" in lines[0]


def test_a_point_that_kept_up_or_has_no_verdict_ends_nothing(db) -> None:
    a2, a8 = _queue(db, rate_axis([2, 8]))
    run_id = _stored(db, a2)
    assert after_job_run(db, a2, _result(run_id, CALM), print) == []
    assert after_job_run(db, a2, _result(run_id, None), print) == []
    assert jobs.get_job(db, a8.id).status == "queued" and get_series(db, run_id, "sweep_stop") is None


def test_a_closed_loop_is_judged_against_the_previous_concurrency(db) -> None:
    c2, c4, c8 = _queue(db, concurrency_axis([2, 4, 8]))
    _stored(db, c2, requests_per_s=20.0)
    alone = Verdict(None, "cannot tell from one run at concurrency 4 without the server's queue", "closed", 4.0)
    run_id = _stored(db, c4, requests_per_s=21.0)
    assert after_job_run(db, c4, _result(run_id, alone, requests_per_s=21.0), print) == [c8.id]
    reason = jobs.get_job(db, c8.id).error
    assert reason.startswith(f"not run: saturated at concurrency 4 (run {run_id}): throughput rose +5% (20 → 21 req/s)")


@pytest.mark.slow
@pytest.mark.alone
def test_queued_jobs_stop_where_they_run(db, db_url, monkeypatch) -> None:
    # each point runs in the job process's own code (in this process), against a server that queues
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # the job process wraps them (its log): put them back after
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    with one_at_a_time(service_s=0.03) as url:
        low, high, higher = _queue(db, rate_axis([8, 400, 800]), url=url)
        for job in (low, high):
            claimed = jobs.claim(db, "test-worker", ["cpu"])
            assert claimed.id == job.id
            assert job_process.main(["--job", str(job.id), "--db", db_url]) == job_process.EXIT_DONE
            jobs.finish(db, job.id, "test-worker", jobs.DONE)
    assert jobs.get_job(db, low.id).status == "done" and jobs.get_job(db, high.id).status == "done"
    got = jobs.get_job(db, higher.id)
    run_id = jobs.get_job(db, high.id).run_id
    assert got.status == "cancelled" and got.error.startswith(f"not run: saturated at 400 req/s (run {run_id}): ")
    assert get_series(db, run_id, "saturation")["saturated"] is True
    assert get_series(db, jobs.get_job(db, low.id).run_id, "saturation")["saturated"] is False
