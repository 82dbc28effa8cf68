"""Suites: files, stored suites, queueing under a tag, cron schedules (due, not due, claimed once), checks."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest
from seed_runs import real_quality, spec_dict
from suite_seed import run_suite, suite_of

from engine.jobs import suites
from engine.jobs.suites import SuiteError, check_suite, is_due, load_suite_file, queue_due, resolve_suite
from storage import jobs
from storage import suites as stored

REPO_SUITE = "suites/demo.yaml"
GATES = [{"metric": "tpot_ms_p50", "max_regression_pct": 5}, {"metric": "quality.perplexity", "max_increase_pct": 1}]


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _write(tmp_path, name: str, body: str):
    path = tmp_path / name
    path.write_text(body)
    return path


# -- files -----------------------------------------------------------------------------------
def test_the_demo_suite_file_is_valid():
    suite = load_suite_file(REPO_SUITE)
    assert suite.name == "demo" and [e.name for e in suite.entries] == ["fp32", "int8-weight-only"]
    assert suite.gates[0].needs_significance and not suite.gates[-1].needs_significance


def test_json_and_yaml_files_read_alike(tmp_path):
    data = {"name": "j", "gates": GATES, "entries": [{"name": "a", "spec": spec_dict()}]}
    from_json = load_suite_file(_write(tmp_path, "s.json", json.dumps(data)))
    import yaml

    from_yaml = load_suite_file(_write(tmp_path, "s.yaml", yaml.safe_dump(data)))
    assert from_json == from_yaml


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("name: x\ngates: [{metric: tpot_ms_p50, max: 1}]\nentries: []\n", "entries"),
        (
            "name: x\ngates: [{metric: tpot_ms_p50, max: 1}]\nentries: [{name: a, spec: {model: {source: demo}}}]\n"
            "colour: red\n",
            "colour: unknown field",
        ),
        (
            "name: x\ngates: [{metric: latency_ms, max: 1}]\nentries: [{name: a, spec: {model: {source: demo}}}]\n",
            "'latency_ms' is not a metric",
        ),
        (
            "name: x\ngates: [{metric: quality.corpus_tokens, max: 1}]\n"
            "entries: [{name: a, spec: {model: {source: demo}}}]\n",
            "is not a metric",
        ),
        ("name: x\nentries: [{name: a, spec: {model: {source: demo}}}]\n", "at least one gate"),
        (
            "name: x\ngates: [{metric: tpot_ms_p50, max: 1}]\n"
            "entries: [{name: a, spec: {model: {source: demo}}}, {name: b, spec: {model: {source: demo}}}]\n",
            "same spec",
        ),
        (
            "name: x\ngates: [{metric: tpot_ms_p50, max: 1}]\n"
            "entries: [{name: a, spec: {model: {source: demo}, workload: {requests: 0}}}]\n",
            "requests",
        ),
        ("name: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "must hold a mapping"),
    ],
)
def test_bad_files_give_one_line(tmp_path, body, words):
    with pytest.raises(SuiteError, match=words) as info:
        load_suite_file(_write(tmp_path, "bad.yaml", body))
    assert "\n" not in str(info.value)


def test_a_missing_file_or_name_says_so(db):
    with pytest.raises(SuiteError, match="cannot read suite file"):
        resolve_suite(db, "nowhere/suite.yaml")
    with pytest.raises(SuiteError, match="no suite file or stored suite named 'nightly'"):
        resolve_suite(db, "nightly")


def test_a_file_is_stored_by_name(db):
    suite, source = resolve_suite(db, REPO_SUITE)
    again, none = resolve_suite(db, "demo")
    assert again == suite and source.endswith(REPO_SUITE) and none is None


# -- queueing --------------------------------------------------------------------------------
def test_queue_records_the_tag_and_names_the_jobs(db):
    suite = suite_of(GATES, {"fp32": {}, "bf16": {"dtype": "bfloat16"}})
    job_ids = suites.queue_suite(db, suite, tag="v1")
    queued = [jobs.get_job(db, j) for j in job_ids]
    assert [j.name for j in queued] == ["t/fp32", "t/bf16"] and all(j.status == jobs.QUEUED for j in queued)
    assert stored.has_tag(db, "t", "v1") and not stored.has_tag(db, "t", "v2")


def test_a_bad_entry_queues_nothing(db):
    suite = suite_of(GATES, {"fp32": {}, "bf16": {"dtype": "bfloat16"}})

    def refuse_bf16(_db, spec):
        if spec.recipe.dtype == "bfloat16":
            raise suites.SpecError("bfloat16 is not allowed here")

    with pytest.raises(SuiteError, match="entry bf16: bfloat16 is not allowed"):
        suites.queue_suite(db, suite, tag="v1", check=refuse_bf16)
    assert jobs.list_jobs(db) == []


@pytest.mark.parametrize("tag", ["12", "has space", ""])
def test_bad_tags_are_refused(db, tag):
    with pytest.raises(SuiteError, match="tag"):
        suites.queue_suite(db, suite_of(GATES), tag=tag)


# -- checks against a tag --------------------------------------------------------------------
def test_check_passes_on_a_clean_rerun_and_fails_on_a_regression(db):
    suite = suite_of(GATES, {"fp32": {}, "bf16": {"dtype": "bfloat16"}})
    base_q = {"quality": real_quality(18.76)}
    run_suite(db, suite, {"fp32": {**base_q}, "bf16": {"dtype": "bfloat16", **base_q}}, tag="base")
    run_suite(db, suite, {"fp32": {"seed": 5, **base_q}, "bf16": {"dtype": "bfloat16", "seed": 5, **base_q}})
    assert check_suite(db, suite, "base").passed
    slower, damaged = {"tpot_ms": 15, "seed": 6, **base_q}, {"dtype": "bfloat16", "quality": real_quality(54.0)}
    run_suite(db, suite, {"fp32": slower, "bf16": damaged})
    report = check_suite(db, suite, "base")
    failed = {(r.entry, r.metric) for r in report.failed}
    assert failed == {("fp32", "tpot_ms_p50"), ("bf16", "quality.perplexity")}


def test_check_against_an_unknown_tag_or_run_is_a_usage_error(db):
    suite = suite_of(GATES)
    with pytest.raises(SuiteError, match="no job of suite t was queued under tag 'base'"):
        check_suite(db, suite, "base")
    with pytest.raises(SuiteError, match="there is no run 99"):
        check_suite(db, suite, "99")


def test_an_entry_never_run_fails_its_gates(db):
    suite = suite_of(GATES, {"fp32": {}, "bf16": {"dtype": "bfloat16"}})
    ids = run_suite(db, suite_of(GATES), {"fp32": {"quality": real_quality()}}, tag="base")
    report = check_suite(db, suite, str(ids["fp32"]))
    assert {r.entry for r in report.failed} == {"bf16"}
    assert all("no run of this entry" in r.reason for r in report.failed)


# -- schedules -------------------------------------------------------------------------------
def test_due_times_of_a_daily_schedule():
    sched = stored.Schedule(
        1, "s", None, "0 2 * * *", None, datetime.now(UTC), int(_ts("2026-12-01T10:00")), None, None, ()
    )
    assert is_due(sched, _ts("2026-12-01T23:59")) is None  # today's 02:00 was before the schedule existed
    assert is_due(sched, _ts("2026-12-02T02:00")) == _ts("2026-12-02T02:00")
    assert is_due(sched, _ts("2026-12-02T09:30")) == _ts("2026-12-02T02:00")  # a worker that was away catches up once
    claimed = stored.Schedule(**{**sched.__dict__, "last_due_ts": int(_ts("2026-12-02T02:00"))})
    assert is_due(claimed, _ts("2026-12-02T09:30")) is None
    assert is_due(claimed, _ts("2026-12-05T03:00")) == _ts("2026-12-05T02:00")  # missed days: queued once, the latest


def test_a_due_schedule_is_queued_once_and_a_bad_cron_is_refused(db):
    suites.schedule_suite(db, REPO_SUITE, "0 2 * * *", tag="nightly", now=_ts("2026-12-01T10:00"))
    assert queue_due(db, now=_ts("2026-12-01T12:00")) == []
    said = queue_due(db, now=_ts("2026-12-02T02:00:30"))
    assert len(said) == 1 and "suite demo due 2026-12-02 02:00 UTC: queued jobs" in said[0]
    assert queue_due(db, now=_ts("2026-12-02T02:05")) == []
    assert len(jobs.list_jobs(db)) == 2 and stored.has_tag(db, "demo", "nightly")
    (sched,) = stored.list_schedules(db)
    assert sched.last_due_ts == _ts("2026-12-02T02:00") and len(sched.last_job_ids) == 2
    with pytest.raises(SuiteError, match="not a cron expression"):
        suites.schedule_suite(db, "demo", "every night")


def test_two_workers_on_one_database_queue_a_due_time_once(db, db_url):
    from storage.db import Database

    suites.schedule_suite(db, REPO_SUITE, "*/5 * * * *", now=_ts("2026-12-01T10:00"))
    barrier, said = threading.Barrier(4), []

    def worker() -> None:
        own = Database(db_url)  # an engine of its own, as another worker process would have
        barrier.wait()
        said.extend(queue_due(own, now=_ts("2026-12-01T10:07")))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(said) == 1 and len(jobs.list_jobs(db)) == 2


def test_the_worker_queues_due_suites_in_its_loop(db, db_url, tmp_path):
    from engine.jobs.worker import Worker

    suites.schedule_suite(db, REPO_SUITE, "* * * * *", now=time.time() - 120)  # due this minute
    worker = Worker(db_url, ["cuda:7"], log_dir=tmp_path)  # a slot no job of the suite (cpu) can take
    worker.step()
    assert {j.name for j in jobs.list_jobs(db)} == {"demo/fp32", "demo/int8-weight-only"}
    worker.step()  # checked again only after SCHEDULES_S
    assert len(jobs.list_jobs(db)) == 2
