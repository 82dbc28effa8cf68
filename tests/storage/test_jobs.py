"""The jobs façade: submit, exclusive claims across processes, progress, cancel, retry, recovery."""

from __future__ import annotations

import multiprocessing as mp
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from engine.spec import parse_job_spec
from storage import jobs
from storage.models import JobRow, WorkerRow


def _spec(**workload):
    wl = {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, **workload}
    return parse_job_spec({"model": {"source": "demo"}, "workload": wl})


def test_submit_claim_finish_cycle(db):
    job_id = jobs.submit(db, _spec(), sweep="s1", timeout_s=60)
    job = jobs.get_job(db, job_id)
    assert job.status == "queued" and job.sweep == "s1" and job.timeout_s == 60
    assert jobs.claim(db, "w1", ["cuda:0"]) is None  # wrong device
    claimed = jobs.claim(db, "w1", ["cpu"])
    assert claimed.id == job_id and claimed.status == "running" and claimed.attempts == 1
    assert jobs.claim(db, "w2", ["cpu"]) is None  # nothing left
    jobs.mark_started(db, job_id, "w1")
    assert jobs.progress(db, job_id, phase="measuring", fraction=0.5, note="n", eta_s=3.0, measuring_started=True)
    job = jobs.get_job(db, job_id)
    assert job.phase == "measuring" and job.progress == 0.5 and job.measuring_started and job.elapsed_s is not None
    assert jobs.finish(db, job_id, "w2", "done") is None  # not theirs
    done = jobs.finish(db, job_id, "w1", "done", log_tail="bye")
    assert done.status == "done" and done.progress == 1.0 and done.log_tail == "bye"
    assert not jobs.progress(db, job_id, phase="x", fraction=0.1)  # no longer running


def test_cancel_queued_and_running_and_retry(db):
    a, b = jobs.submit_many(db, [_spec(), _spec(seed=1)])
    assert jobs.cancel(db, a).status == "cancelled"
    running = jobs.claim(db, "w", ["cpu"])
    assert running.id == b
    after = jobs.cancel(db, b)
    assert after.status == "running" and after.cancel_requested
    assert jobs.cancel_requested(db, [b]) == [b]
    assert jobs.retry(db, b) is None  # still running
    jobs.finish(db, b, "w", "failed", error="boom")
    new = jobs.retry(db, b)
    assert new is not None and jobs.get_job(db, new).status == "queued"
    assert jobs.get_job(db, new).spec == jobs.get_job(db, b).spec
    assert jobs.cancel(db, 999) is None


def _age(db, job_id, worker_id, seconds):
    old = datetime.now(UTC) - timedelta(seconds=seconds)
    with db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(heartbeat_at=old))
        s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(heartbeat_at=old))


def test_recover_stale_requeues_once_then_fails(db):
    job_id = jobs.submit(db, _spec())
    jobs.register_worker(db, "dead", "h", 1, ["cpu"])
    jobs.claim(db, "dead", ["cpu"])
    _age(db, job_id, "dead", 120)
    assert jobs.recover_stale(db, stale_after_s=30) == [jobs.Recovered(job_id, "dead", "requeued")]
    assert jobs.get_job(db, job_id).status == "queued"
    # claimed a second time, lost again: it does not go back a second time
    jobs.claim(db, "dead", ["cpu"])
    _age(db, job_id, "dead", 120)
    [r] = jobs.recover_stale(db, stale_after_s=30)
    assert r.action == "failed"
    job = jobs.get_job(db, job_id)
    assert job.status == "failed" and job.error == jobs.WORKER_LOST


def test_recover_measuring_job_fails_and_fresh_one_is_left(db):
    a, b = jobs.submit_many(db, [_spec(), _spec(seed=2)])
    jobs.claim(db, "w", ["cpu"])
    jobs.progress(db, a, phase="measuring", fraction=0.3, measuring_started=True)
    jobs.claim(db, "live", ["cpu"])
    assert jobs.recover_stale(db, stale_after_s=30) == []  # fresh heartbeats
    assert [r.job_id for r in jobs.recover_stale(db, stale_after_s=30, dead_worker_ids=["w"])] == [a]
    assert jobs.get_job(db, a).error == "worker lost"
    assert jobs.get_job(db, b).status == "running"


def _claimer(url: str, worker: str, out: mp.Queue) -> None:
    from storage import jobs as j
    from storage import open_database

    db = open_database(url)
    got = []
    while True:
        job = j.claim(db, worker, ["cpu"])
        if job is None:
            break
        got.append(job.id)
    out.put(got)


def test_claims_are_exclusive_across_four_processes(db, db_url):
    spec = _spec()
    ids = jobs.submit_many(db, [spec] * 200)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(db_url, f"w{i}", out)) for i in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    claimed = [i for r in results for i in r]
    assert sorted(claimed) == ids  # every job exactly once
    assert len(set(claimed)) == len(claimed)
    by_worker = {}
    for job in jobs.list_jobs(db, limit=500):
        by_worker.setdefault(job.worker_id, []).append(job.id)
    assert sum(len(v) for v in by_worker.values()) == 200
    assert all(j.attempts == 1 for j in jobs.list_jobs(db, limit=500))


def test_invalid_timeout_queues_nothing(db):
    with pytest.raises(ValueError):
        jobs.submit(db, _spec(), timeout_s=0)
    assert jobs.list_jobs(db) == []


@pytest.mark.slow
def test_claims_are_exclusive_on_postgresql(pg_url):
    from storage import open_database

    db = open_database(pg_url)
    ids = jobs.submit_many(db, [_spec()] * 200)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(pg_url, f"pg{i}", out)) for i in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    claimed = sorted(i for r in results for i in r)
    assert claimed == ids
    # recovery and cancel work the same there
    jobs.register_worker(db, "pgw", "h", 1, ["cpu"])
    job_id = jobs.submit(db, _spec())
    assert jobs.claim(db, "pgw", ["cpu"]).id == job_id
    assert [r.action for r in jobs.recover_stale(db, stale_after_s=30, dead_worker_ids=["pgw"])] == ["requeued"]
    assert jobs.cancel(db, job_id).status == "cancelled"
