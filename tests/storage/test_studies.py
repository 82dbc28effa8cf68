"""The studies façade: unique names, status moves, the lease, a trial's job queued with it, reuse lookup."""

from __future__ import annotations

import pytest

from engine.spec import parse_job_spec
from storage import jobs, studies
from storage.runs import NewRun, save_run


def _spec():
    return parse_job_spec({"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "output_tokens": 4}})


def test_create_get_list_and_a_taken_name(db):
    study = studies.create_study(db, "s1", {"knobs": ["dtype"]}, submitted_by="cli:me")
    assert (study.status, study.optuna_name, study.submitted_by) == ("running", "latencylab:s1", "cli:me")
    assert studies.get_study(db, "s1") == study == studies.get_study(db, study.id)
    assert studies.get_study(db, "nope") is None
    with pytest.raises(ValueError, match="a study named 's1' exists already"):
        studies.create_study(db, "s1", {})
    assert [s.name for s in studies.list_studies(db)] == ["s1"]


def test_status_moves_only_where_allowed(db):
    study = studies.create_study(db, "s1", {})
    assert studies.set_status(db, study.id, studies.PAUSED).status == "paused"
    assert studies.set_status(db, study.id, studies.PAUSED).status == "paused"
    assert studies.set_status(db, study.id, studies.RUNNING).status == "running"
    stopped = studies.set_status(db, study.id, studies.STOPPED, note="stop by me")
    assert stopped.is_final and stopped.note == "stop by me"
    assert studies.set_status(db, study.id, studies.RUNNING).status == "stopped"  # final stays final
    assert studies.set_status(db, 999, studies.PAUSED) is None


def test_one_holder_of_the_lease_at_a_time(db):
    study = studies.create_study(db, "s1", {})
    assert studies.try_lock(db, study.id, "a")
    assert not studies.try_lock(db, study.id, "b")
    assert studies.try_lock(db, study.id, "a")  # its own lease is renewed
    studies.unlock(db, study.id, "b")  # not b's: nothing happens
    assert not studies.try_lock(db, study.id, "b")
    studies.unlock(db, study.id, "a")
    assert studies.try_lock(db, study.id, "b")
    assert studies.try_lock(db, study.id, "c", ttl_s=-1) is False
    studies.unlock(db, study.id, "b")
    assert studies.try_lock(db, study.id, "c", ttl_s=-1)  # an expired lease is anybody's
    assert studies.try_lock(db, study.id, "d")


def test_a_trial_and_its_job_are_written_together(db):
    study = studies.create_study(db, "s1", {})
    trial = studies.add_trial(db, study.id, 0, {"dtype": "auto"}, spec=_spec(), predicted={"tpot_ms": 1.5})
    job = jobs.get_job(db, trial.job_id)
    assert job.status == "queued" and job.fingerprint == trial.fingerprint and trial.attempts == 1
    assert studies.job_statuses(db, [job.id]) == {job.id: ("queued", None, None)}
    done = studies.update_trial(db, trial.id, status=studies.COMPLETE, values=[1.0], feasible=True, measured={"x": 1})
    assert (done.status, done.values, done.feasible, done.measured, done.predicted) == (
        "complete",
        [1.0],
        True,
        {"x": 1},
        {"tpot_ms": 1.5},
    )
    with pytest.raises(TypeError, match="unknown trial field"):
        studies.update_trial(db, trial.id, colour="red")
    with pytest.raises(Exception):  # noqa: B017 - the same number twice: refused, nothing half-written
        studies.add_trial(db, study.id, 0, {}, spec=_spec())
    assert len(jobs.list_jobs(db)) == 1
    assert studies.active_study_ids(db) == [study.id]


def test_measured_run_needs_a_done_run_with_the_accuracy_asked_for(db):
    spec = _spec()

    def run(status, quality):
        return save_run(
            db,
            NewRun(
                status=status,
                spec={},
                fingerprint=spec.fingerprint(),
                model="demo",
                engine="t",
                device="cpu",
                quality=quality,
            ),
        )

    run("failed", {"perplexity": 1.0})
    assert studies.measured_run(db, spec.fingerprint()) is None
    plain = run("done", None)
    assert studies.measured_run(db, spec.fingerprint()) == plain
    assert studies.measured_run(db, spec.fingerprint(), ("perplexity",)) is None
    with_ppl = run("done", {"perplexity": 20.0})
    run("done", None)  # newer, but without perplexity
    assert studies.measured_run(db, spec.fingerprint(), ("perplexity",)) == with_ppl
