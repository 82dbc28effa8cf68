"""The decision line (issue 34): how it reads for a faster-but-worse recipe, a no-difference pair and an
under-powered pair; how far it can be trusted; the repeats that would settle it."""

from __future__ import annotations

import re

import pytest
from test_one_verdict import _store

from engine.report.compare import compare_runs
from engine.report.decision import decision_line, evidence, repeat_specs
from engine.report.export import load_requests, load_runs
from engine.report.verdicts import Verdict
from engine.spec import SpecError


def _decision(db, case: str) -> str:
    base_id, new_id = _store(db, case)
    runs, _ = load_runs(db, [base_id, new_id])
    return compare_runs(runs, base_id, load_requests(db, [base_id, new_id])).decisions[new_id].text


def test_a_faster_but_worse_recipe_says_both_in_words_with_labelled_intervals(db):
    text = _decision(db, "faster but worse")
    assert re.fullmatch(
        r"run \d+ · float32: 1\.\d+× faster decode \(significant, 95 % CI 1\.\d+–1\.\d+×\), "
        r"perplexity 0\.\d+ % worse \(significant, 95 % CI 0\.\d+–0\.\d+ %\); measured once: repeat to confirm\.",
        text,
    ), text


def test_a_pair_with_no_difference_says_so_within_the_margin(db):
    text = _decision(db, "no difference")
    assert re.fullmatch(
        r"run \d+ · float32: no significant difference in decode \(95 % CI from [\d.]+ % faster to [\d.]+ % slower; "
        r"within ± 5 %\), no significant difference in perplexity \(95 % CI from [\d.]+ % better to [\d.]+ % worse; "
        r"within ± 5 %\); measured once: repeat to confirm\.",
        text,
    ), text


def test_an_under_powered_pair_says_not_enough_data_never_no_change(db):
    text = _decision(db, "under-powered")
    assert "decode: not enough data (95 % CI from " in text and "perplexity: not enough data (95 % CI from " in text
    assert text.endswith("; not enough data to decide on decode or perplexity (measured once): repeat.")
    assert "no significant" not in text and "no change" not in text


def _verdict(state: str) -> Verdict:
    return Verdict("tpot_ms_p50", 0.8, state=state)


class _Run:
    def __init__(self, trials: int = 1, flags: list | None = None) -> None:
        self.metrics = {"trials": [{}] * trials if trials > 1 else [], "noise_flags": flags or []}


@pytest.mark.parametrize(
    ("runs", "state", "grade", "words"),
    [
        ((_Run(3), _Run(3)), "better", "decision-grade", "decision-grade (3 trials each)"),
        ((_Run(3), _Run(1)), "better", "measured once", "measured once: repeat to confirm"),
        (
            (_Run(1, [{"flag": "contention", "kind": "machine"}]), _Run(1)),
            "worse",
            "measured once",
            "measured once under contention: repeat to confirm",
        ),
        (
            (_Run(3, [{"flag": "steal", "kind": "machine"}]), _Run(3)),
            "same",
            "under contention",
            "measured under contention: repeat on a quiet machine",
        ),
        ((_Run(3), _Run(3)), "unclear", "not enough data", "not enough data to decide on decode: repeat"),
    ],
)
def test_how_far_a_decision_can_be_trusted(runs, state, grade, words):
    found = evidence(runs, [("decode", _verdict(state))])
    assert found[:2] == (grade, words) and found[2] == (grade != "decision-grade")


def test_failed_runs_decide_nothing(db):
    from seed_runs import make_run

    from storage.runs import get_run

    base = get_run(db, make_run(db))
    broken = get_run(db, make_run(db, status="failed", error="out of memory"))
    assert decision_line(broken, base).text.endswith("failed (out of memory); nothing to decide")
    assert "the baseline failed" in decision_line(base, broken).text


def test_the_repeats_are_each_compared_spec_with_the_decision_preset_baseline_first(db):
    base_id, new_id = _store(db, "faster but worse")
    runs, _ = load_runs(db, [new_id, base_id])  # compared in this order, the baseline second
    specs = repeat_specs(runs, base_id)
    names = [f"repeat of run {i} (trial {t} of 3)" for t in (1, 2, 3) for i in (base_id, new_id)]
    assert [s.name for s in specs] == names  # interleaved rounds, the baseline first in each
    assert all(s.workload.trials == 1 and s.workload.until_ci_pct is None for s in specs)
    assert specs[0].fingerprint() == specs[2].fingerprint() == specs[4].fingerprint()  # one recipe's trials
    assert specs[0].recipe.dtype == runs[1].spec["recipe"]["dtype"] and specs[0].workload.requests == 6
    broken = runs[0]
    broken.spec["workload"]["requests"] = 0
    with pytest.raises(SpecError, match=f"run {new_id}'s spec cannot be queued again"):
        repeat_specs([broken], base_id)
