"""What workers do to jobs, one outcome per job: a failed job has a failed run (item 13), and a
result that comes after its job was recovered is refused with nothing stored (item 14)."""

from __future__ import annotations

import pytest

from engine.jobs.worker import failed_run_of
from storage import ClaimLost, jobs
from storage.runs import count_runs, get_run, list_runs, save_run
from tests.storage.test_jobs import _age, _spec
from tests.storage.test_runs import new_run


def _measuring(db, worker: str = "w") -> int:
    job_id = jobs.submit(db, _spec())
    jobs.register_worker(db, worker, "h", 1, ["cpu"])
    jobs.claim(db, worker, ["cpu"])
    jobs.progress(db, job_id, phase="measuring", fraction=0.3, measuring_started=True)
    return job_id


def test_a_failed_job_without_a_run_gets_a_failed_run_with_its_reason(db):
    job_id = _measuring(db)
    job = jobs.get_job(db, job_id)
    ended = jobs.finish(
        db, job_id, "w", "failed", error="killed by signal 9 (SIGKILL)", failed_run=failed_run_of(job, "x")
    )
    run = get_run(db, ended.run_id)
    assert run.status == "failed" and run.error == "killed by signal 9 (SIGKILL)" and run.job_id == job_id
    assert run.model.startswith("demo")
    assert run.fingerprint == job.fingerprint and run.engine == "transformers" and run.device == "cpu"
    assert run.metrics is None


def test_a_job_whose_process_stored_its_run_keeps_that_run(db):
    job_id = _measuring(db)
    stored = save_run(db, new_run(status="failed", error="boom", job_id=job_id, worker_id="w"))
    ended = jobs.finish(
        db, job_id, "w", "failed", error="boom", failed_run=failed_run_of(jobs.get_job(db, job_id), "x")
    )
    assert ended.run_id == stored and count_runs(db) == 1


def test_a_late_result_after_recovery_is_refused_and_the_job_has_one_failed_run(db):
    job_id = _measuring(db, "stopped")
    _age(db, job_id, "stopped", 120)
    [r] = jobs.recover_stale(db, stale_after_s=30, failed_run=failed_run_of)
    assert r.action == "failed"
    job = jobs.get_job(db, job_id)
    assert job.status == "failed" and job.error == jobs.WORKER_LOST
    [run] = list_runs(db)
    assert run.id == job.run_id and run.status == "failed" and run.error == jobs.WORKER_LOST
    with pytest.raises(ClaimLost, match=f"job {job_id} is no longer held by worker stopped"):
        save_run(db, new_run(job_id=job_id, worker_id="stopped"))  # the resumed job's result
    assert count_runs(db) == 1  # no orphan run
    assert jobs.finish(db, job_id, "stopped", "done") is None  # the resumed worker cannot flip it
    assert jobs.get_job(db, job_id).status == "failed"


def test_a_lost_worker_whose_job_had_stored_its_run_ends_the_job_as_the_run_did(db):
    job_id = _measuring(db, "stopped")
    run_id = save_run(db, new_run(job_id=job_id, worker_id="stopped"))
    _age(db, job_id, "stopped", 120)
    [r] = jobs.recover_stale(db, stale_after_s=30, failed_run=failed_run_of)
    job = jobs.get_job(db, job_id)
    assert r.action == "done" and job.status == "done" and job.run_id == run_id
    assert job.progress_note == jobs.LOST_AFTER_RUN and count_runs(db) == 1


def test_a_job_with_a_stored_run_is_not_given_back_to_the_queue(db):
    job_id = jobs.submit(db, _spec())
    jobs.claim(db, "w", ["cpu"])
    save_run(db, new_run(job_id=job_id, worker_id="w"))
    assert not jobs.requeue(db, job_id, "w")
    _age(db, job_id, "w", 120)  # not measuring, first attempt: it would be re-queued without its run
    [r] = jobs.recover_stale(db, stale_after_s=30, dead_worker_ids=["w"])
    assert r.action == "done"
