"""Verdicts through the whole Compare path on synthetic stamps with known effects.

RequestRecords with stamps -> compute_metrics -> compare_runs (verdicts from the raw samples) ->
the PM summary. Rates measured here (seeded, 200 comparisons each at 200 requests per run):
see test_simulated_detection_and_false_alarm_rates.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from engine.measure.metrics import compute_metrics
from engine.measure.records import RequestRecord, RunRecord
from engine.report.compare import compare_runs, comparison_frame
from engine.report.summary import summarize_against
from engine.report.verdicts import accuracy_verdict, speed_verdict

MS = 1_000_000


def synthetic_requests(n: int, tpot_ms: float, rng: np.random.Generator, output_tokens: int = 8) -> list:
    """``n`` back-to-back requests: TTFT ~ lognormal around 50 ms, each request's TPOT ~ lognormal around ``tpot_ms``."""
    t, out = 0, []
    for i in range(n):
        req = RequestRecord(index=i, arrival_ns=t, send_ns=t, prompt_tokens=32)
        stamp = t + int(50 * MS * rng.lognormal(0, 0.1))
        req.add_chunk(stamp, 1)
        per_request = tpot_ms * rng.lognormal(0, 0.2)  # request-to-request spread of decode speed
        for gap in per_request * rng.lognormal(0, 0.05, output_tokens - 1):
            stamp += int(gap * MS)
            req.add_chunk(stamp, 1)
        out.append(req)
        t = stamp + 1
    return out


def synthetic_run(run_id: int, requests: list, name: str) -> SimpleNamespace:
    """A run-like object (what storage returns) with metrics computed from the stamps."""
    metrics = compute_metrics(
        RunRecord(start_ns=requests[0].send_ns, end_ns=requests[-1].chunk_ns[-1], requests=requests)
    )
    return SimpleNamespace(
        id=run_id, name=name, status="done", error=None, model="demo", engine="transformers", device="cpu",
        device_name="test CPU", spec={}, metrics=metrics, quality=None,
    )  # fmt: skip


def compare_pair(rng: np.random.Generator, effect: float, n: int = 200) -> tuple:
    base = synthetic_requests(n, 20.0, rng)
    new = synthetic_requests(n, 20.0 * effect, rng)
    runs = [synthetic_run(1, base, "A"), synthetic_run(2, new, "B")]
    return compare_runs(runs, 1, {1: base, 2: new}), runs


@pytest.mark.slow
def test_simulated_detection_and_false_alarm_rates():
    """A true 10 % slower TPOT at 200 requests is detected; equal draws are flagged at most ~5 % of the time."""
    rng = np.random.default_rng(2024)
    trials = 200
    detected = false_alarms = 0
    for _ in range(trials):
        base, new, same = (synthetic_requests(200, tpot, rng) for tpot in (20.0, 22.0, 20.0))
        runs = {i: synthetic_run(i, r, f"r{i}") for i, r in ((1, base), (2, new), (3, same))}
        metrics = {i: r.metrics for i, r in runs.items()}
        # the exact per-key verdict compare_runs computes (cheaper than every key of the table 400 times)
        from engine.report.verdicts import run_samples

        samples = {i: run_samples(r, metrics[i]["duration_s"]) for i, r in ((1, base), (2, new), (3, same))}
        for other, hit in ((2, True), (3, False)):
            v = speed_verdict(
                "tpot_ms_p50",
                metrics[1]["tpot_ms"]["p50"],
                metrics[other]["tpot_ms"]["p50"],
                metrics[1],
                metrics[other],
                (samples[1], samples[other]),
            )
            if hit:
                detected += v.state == "worse"
            else:
                false_alarms += v.significant
    print(f"detected {detected}/{trials}, false alarms {false_alarms}/{trials}")
    assert detected / trials >= 0.9
    assert false_alarms / trials <= 0.05 + 0.03  # 5 % nominal, a few points of sampling error over 200


def test_a_ten_percent_slower_decode_is_said_with_its_interval():
    comparison, runs = compare_pair(np.random.default_rng(5), 1.10)
    verdict = comparison.verdicts[2]["tpot_ms_p50"]
    assert verdict.state == "worse" and verdict.interval.lo > 1.0
    text = comparison.summaries[2]
    assert "slower decode (significant, 95 % CI " in text and "first token" in text
    frame = comparison_frame(comparison, formatted=True).set_index("metric")
    assert frame.loc["TPOT p50 (GenAI-Perf: ITL)", "#2 verdict"] == "worse (significant)"
    assert frame.loc["TTFT p50", "#2 verdict"] == "no significant difference (within ± 5 %)"  # TTFT has no effect
    numbers = comparison_frame(comparison).set_index("metric")
    assert numbers.loc["TPOT p50 (GenAI-Perf: ITL)", "#2 verdict"] == "worse"
    assert numbers.loc["TPOT p50 (GenAI-Perf: ITL)", "#2 ratio CI low"] > 1.0
    # the same verdict from the stored intervals alone (no raw samples): cruder, same direction
    assert compare_runs(runs, 1).verdicts[2]["tpot_ms_p50"].state == "worse"


def test_equal_runs_read_no_significant_difference_once_the_interval_is_within_the_margin():
    """Equal draws: at 400 requests the ratio's interval lies within ± 5 % ("no significant difference");
    at 200 it spans 1 but reaches past 0.95: "not enough data", never "no change"."""
    comparison, _runs = compare_pair(np.random.default_rng(6), 1.0, n=400)
    assert comparison.verdicts[2]["tpot_ms_p50"].state == "same"
    assert "no significant difference in decode (95 % CI from " in comparison.summaries[2]
    assert "; within ± 5 %)" in comparison.summaries[2]
    fewer, _runs = compare_pair(np.random.default_rng(6), 1.0, n=200)
    assert fewer.verdicts[2]["tpot_ms_p50"].state == "unclear"
    assert "decode: not enough data (95 % CI from 8.8 % faster to 0.91 % slower)" in fewer.summaries[2]


def test_too_few_requests_to_tell():
    rng = np.random.default_rng(7)
    base, new = synthetic_requests(4, 20.0, rng), synthetic_requests(4, 40.0, rng)
    runs = [synthetic_run(1, base, "A"), synthetic_run(2, new, "B")]
    comparison = compare_runs(runs, 1, {1: base, 2: new})
    assert comparison.verdicts[2]["tpot_ms_p50"].state == "thin"
    assert "decode: not enough data (n=4; p50 needs 6)" in comparison.summaries[2]
    assert "slower" not in comparison.summaries[2]  # never claimed
    # without samples the stored counts say the same
    assert "decode: not enough data (n=4; p50 needs 6)" in summarize_against(runs[1], runs[0])


def test_accuracy_changes_against_two_standard_errors():
    base = {"perplexity": 20.0, "perplexity_stderr": 0.5}
    near = {"perplexity": 20.6, "perplexity_stderr": 0.5}  # +0.6 < 2 x 0.71, but ± 1.4 is 7 % of 20: unclear
    far = {"perplexity": 23.0, "perplexity_stderr": 0.5}
    assert accuracy_verdict("quality.perplexity", 20.0, 20.6, base, near).state == "unclear"
    tight = {"perplexity": 20.1, "perplexity_stderr": 0.1}  # 0.1 ± 0.28: within ± 5 % of 20
    same = accuracy_verdict("quality.perplexity", 20.0, 20.1, {**base, "perplexity_stderr": 0.1}, tight)
    assert same.state == "same" and same.interval.lo < 1 < same.interval.hi
    assert accuracy_verdict("quality.perplexity", 20.0, 23.0, base, far).state == "worse"
    assert accuracy_verdict("quality.perplexity", 23.0, 20.0, far, base).state == "better"
    task = accuracy_verdict("quality.task:count", 0.5, 0.6, {"task:count:stderr": 0.02}, {"task:count:stderr": 0.02})
    assert task.state == "better"
    assert accuracy_verdict("quality.perplexity", 20.0, 23.0, {"perplexity": 20.0}, far).state == "none"


def test_runs_with_several_trials_are_judged_on_intervals_that_include_their_drift():
    """Per-request resamples would call a 10 % gap significant; three drifting trials do not support it."""
    rng = np.random.default_rng(3)
    base_requests, new_requests = synthetic_requests(200, 20.0, rng), synthetic_requests(200, 22.0, rng)
    base, new = synthetic_run(1, base_requests, "A"), synthetic_run(2, new_requests, "B")
    plain = compare_runs([base, new], 1, {1: base_requests, 2: new_requests})
    assert plain.verdicts[2]["tpot_ms_p50"].state == "worse"  # the per-request interval alone: significant
    for run, values in ((base, [16.0, 20.0, 24.0]), (new, [18.0, 22.0, 26.0])):  # trials that drift
        run.metrics["trials"] = [{"trial": i, "tpot_ms_p50": v} for i, v in enumerate(values)]
        run.metrics["tpot_ms"]["ci"]["p50"] = [min(values) - 5, max(values) + 5]
    verdict = compare_runs([base, new], 1, {1: base_requests, 2: new_requests}).verdicts[2]["tpot_ms_p50"]
    assert verdict.state == "unclear", verdict  # not significant once the drift is counted: not enough data
