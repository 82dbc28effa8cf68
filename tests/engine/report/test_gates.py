"""Regression gates on hand-made runs with known effects: significance, thresholds, accuracy, reports."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

import pytest
from pydantic import ValidationError
from seed_runs import make_run, real_quality
from suite_seed import WORKLOAD

from engine.report.gates import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    EntryCheck,
    Gate,
    check_entries,
    junit_xml,
    markdown,
    report_json,
)
from storage.runs import get_requests, get_run


def _check(db, gates, base: dict, new: dict, n: int = 30) -> list:
    """Store a baseline and a new run (make_run keywords), judge ``gates`` on them."""
    ids = [make_run(db, workload=WORKLOAD, n=n, **kw) for kw in (base, new)]
    runs = [get_run(db, i) for i in ids]
    check = EntryCheck("e", [Gate(**g) for g in gates], runs[0], runs[1], *(get_requests(db, i) for i in ids))
    return check_entries("s", "tag base", [check]).results


TPOT_GATE = {"metric": "tpot_ms_p50", "max_regression_pct": 5, "significant": True}


def test_a_significantly_slower_decode_fails_the_gate(db):
    (r,) = _check(db, [TPOT_GATE], {"tpot_ms": 10}, {"tpot_ms": 15, "seed": 3})
    assert r.status == FAIL and "significant" in r.reason
    assert 40 < r.change_pct < 60 and r.ci_pct[0] > 5


def test_the_same_distribution_passes(db):
    (r,) = _check(db, [TPOT_GATE], {"tpot_ms": 10}, {"tpot_ms": 10, "seed": 3})
    assert r.status == PASS
    assert r.ci_pct[0] < 1 and r.ci_pct[1] > -1  # a small interval around no change


def test_a_regression_within_the_threshold_passes(db):
    (r,) = _check(db, [{**TPOT_GATE, "max_regression_pct": 80}], {"tpot_ms": 10}, {"tpot_ms": 15, "seed": 3})
    assert r.status == PASS and r.reason == "within the gate"


def test_a_faster_run_passes(db):
    (r,) = _check(db, [TPOT_GATE], {"tpot_ms": 15}, {"tpot_ms": 10, "seed": 3})
    assert r.status == PASS and r.change_pct < -20


def test_too_few_requests_for_an_interval_is_inconclusive_not_a_pass_or_fail(db):
    (r,) = _check(db, [TPOT_GATE], {"tpot_ms": 10}, {"tpot_ms": 15, "seed": 3}, n=4)
    assert r.status == INCONCLUSIVE and "n too small" in r.reason and r.ci_pct is None


def test_without_significance_any_change_over_the_gate_fails(db):
    gate = {"metric": "tpot_ms_p50", "max_regression_pct": 5, "significant": False}
    (r,) = _check(db, [gate], {"tpot_ms": 10}, {"tpot_ms": 15, "seed": 3}, n=4)
    assert r.status == FAIL


def test_damaged_accuracy_fails_the_perplexity_gate(db):
    gate = {"metric": "quality.perplexity", "max_increase_pct": 1}
    (r,) = _check(db, [gate], {"quality": real_quality(18.76)}, {"quality": real_quality(54.0)})
    assert r.status == FAIL and r.change_pct > 150
    assert r.ci_pct is not None  # from both runs' perplexity_stderr


def test_task_minimum_uses_the_new_value(db):
    gate = {"metric": "quality.task:qa.jsonl", "min": 0.4}
    tasks_ok = {"quality": real_quality(tasks={"qa.jsonl": (0.55, "multiple choice")})}
    tasks_bad = {"quality": real_quality(tasks={"qa.jsonl": (0.31, "multiple choice")})}
    (ok,) = _check(db, [gate], tasks_bad, tasks_ok)
    (bad,) = _check(db, [gate], tasks_ok, tasks_bad)
    assert ok.status == PASS and bad.status == FAIL and "below the minimum 0.4" in bad.reason


def test_a_gate_on_a_metric_the_run_lacks_fails(db):
    (r,) = _check(db, [{"metric": "quality.perplexity", "max_increase_pct": 1}], {}, {})
    assert r.status == FAIL and "cannot compare" in r.reason


def test_stored_intervals_judge_throughput(db):
    ids = [make_run(db, workload=WORKLOAD, n=30, tpot_ms=t, seed=s) for t, s in ((10, 0), (15, 3))]
    runs = [get_run(db, i) for i in ids]
    for run, (lo, hi) in zip(runs, ((90.0, 110.0), (50.0, 60.0)), strict=True):
        run.metrics["ci"] = {"output_tokens_per_s": [lo, hi]}
    gate = Gate(metric="output_tokens_per_s", max_regression_pct=5)
    (r,) = check_entries("s", "x", [EntryCheck("e", [gate], runs[0], runs[1])]).results
    assert r.status == FAIL and r.ci_pct[1] < 0


@pytest.mark.parametrize(
    ("gate", "words"),
    [
        ({"metric": "nonsense_ms", "max": 1}, "is not a metric"),
        ({"metric": "quality.window", "max": 1}, "is not a metric"),  # bookkeeping
        ({"metric": "tpot_ms_p50"}, "has no rule"),
        ({"metric": "tpot_ms_p50", "max_regression_pct": 5, "typo": 1}, "typo"),
    ],
)
def test_bad_gates_are_refused(gate, words):
    with pytest.raises(ValidationError, match=words):
        Gate(**gate)


def test_markdown_junit_and_json(db):
    results = _check(db, [TPOT_GATE], {"tpot_ms": 10}, {"tpot_ms": 15, "seed": 3})
    report = check_entries("s", "tag base", [])
    report.results.extend(results)
    text = markdown(report)
    assert "| entry | metric | baseline | new | change (95 % CI) | verdict |" in text
    assert "FAIL" in text and "(+" in text and text.startswith("### suite s against tag base: FAILED")
    root = ET.fromstring(junit_xml(report).split("?>", 1)[1])
    assert root.get("failures") == "1" and root.find("testcase/failure") is not None
    doc = json.loads(json.dumps(report_json(report)))
    assert doc["passed"] is False and doc["results"][0]["status"] == FAIL


def test_a_significantly_faster_run_says_so_and_no_new_run_is_inconclusive(db):
    (r,) = _check(db, [TPOT_GATE], {"tpot_ms": 15}, {"tpot_ms": 10, "seed": 3})
    assert r.reason == "better (significant)"  # the words Compare uses
    run = get_run(db, make_run(db, workload=WORKLOAD, n=30))
    (same,) = check_entries("s", "x", [EntryCheck("e", [Gate(**TPOT_GATE)], run, run)]).results
    assert same.status == INCONCLUSIVE and "no run since the baseline" in same.reason


def test_a_gate_reads_the_older_spellings_as_the_metric_key():
    assert Gate(metric="tpot_ms.p50", max_regression_pct=5).metric == "tpot_ms_p50"
    assert Gate(metric="ttft_p99", max_regression_pct=5).metric == "ttft_ms_p99"
