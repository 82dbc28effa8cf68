"""Trials and adaptive stopping on synthetic stamps (no model): rounds, limits, pooled and per-trial figures."""

from __future__ import annotations

import random

from engine.measure.records import RequestRecord, RunRecord
from engine.measure.stats import repeats_ci
from engine.run import repeats
from engine.spec import Workload

MS = 1_000_000


def fake_phase(tpot_ms: list[float] | float, spread: float = 0.05, output_tokens: int = 8):
    """A PhaseFn whose trial t sends requests with TPOT around ``tpot_ms[t]`` (seeded jitter); calls are logged."""
    calls: list[tuple[int, int, int]] = []

    def run(trial: int, first_index: int, count: int):
        calls.append((trial, first_index, count))
        mean = tpot_ms[min(trial, len(tpot_ms) - 1)] if isinstance(tpot_ms, list) else tpot_ms
        rng = random.Random(trial)
        t = 1_000 * MS * (trial + 1)
        start = t
        out = []
        for i in range(count):
            rec = RequestRecord(index=first_index + i, arrival_ns=start, send_ns=t, prompt_tokens=16)
            stamp = t + 20 * MS
            rec.add_chunk(stamp, 1)
            for _ in range(output_tokens - 1):
                stamp += int(mean * MS * rng.uniform(1 - spread, 1 + spread))
                rec.add_chunk(stamp, 1)
            out.append(rec)
            t = stamp + 1
        return out, start, t

    run.calls = calls
    return run


def test_fixed_trials_are_stored_apart_and_pooled():
    wl = Workload(prompt_tokens=16, requests=6, trials=3)
    phase = fake_phase([12.0, 10.0, 10.0])
    measured = repeats.measure(wl, phase, first_index=1)
    assert phase.calls == [(0, 1, 6), (1, 7, 6), (2, 13, 6)]  # indices run on across trials
    assert [r.trial for r in measured.records] == [0] * 6 + [1] * 6 + [2] * 6
    assert measured.stopped_because is None
    metrics = repeats.repeat_metrics(measured, [], None)
    assert metrics["completed"] == 18 and len(metrics["trials"]) == 3
    assert [row["trial"] for row in metrics["trials"]] == [0, 1, 2]
    assert metrics["trials"][0]["tpot_ms_p50"] > metrics["trials"][1]["tpot_ms_p50"]
    # throughput over the sum of the trials' measured durations, not the wall span between them
    total_s = sum(row["duration_s"] for row in metrics["trials"])
    assert abs(metrics["duration_s"] - total_s) < 1e-6
    drift = metrics["trial_drift"]
    assert 15 < drift["first_vs_rest_pct"] < 25 and drift["spread_pct"] > 15


def test_drift_between_trials_widens_the_headline_interval():
    """Pooled requests alone would read three drifting trials as one tight sample."""
    wl = Workload(prompt_tokens=16, requests=6, trials=3)
    measured = repeats.measure(wl, fake_phase([12.0, 10.0, 10.0]), first_index=1)
    pooled_only = repeats.compute_metrics(RunRecord(0, measured.duration_ns, measured.records), None)
    metrics = repeats.repeat_metrics(measured, [], None)
    lo, hi = metrics["tpot_ms"]["ci"]["p50"]
    plo, phi = pooled_only["tpot_ms"]["ci"]["p50"]
    assert lo <= plo and hi >= phi and (hi - lo) > (phi - plo)
    values = [row["tpot_ms_p50"] for row in metrics["trials"]]
    across = repeats_ci(values)
    assert lo <= across.lo and hi >= across.hi
    assert "3 trials" in metrics["ci_basis"]


def test_one_trial_keeps_the_old_metric_set():
    measured = repeats.measure(Workload(prompt_tokens=16, requests=6), fake_phase(10.0), first_index=0)
    metrics = repeats.repeat_metrics(measured, [], None)
    assert "trials" not in metrics and "stopped_because" not in metrics and metrics["completed"] == 6


def test_adaptive_stopping_reaches_the_interval():
    wl = Workload(prompt_tokens=16, requests=10, until_ci_pct=2.0, max_requests=400)
    measured = repeats.measure(wl, fake_phase(10.0, spread=0.2), first_index=0)
    assert measured.stopped_because.startswith("ci ") and measured.stopped_because.endswith("<= 2 %")
    assert measured.ci_half_width_pct <= 2.0
    assert 10 < len(measured.records) < 400  # more than one round, fewer than the cap
    half = repeats.ci_half_width_pct(measured.records[:-10], "tpot_ms.p50")
    assert half is None or half > 2.0  # one round fewer was not enough
    metrics = repeats.repeat_metrics(measured, [], None, wl.until_metric)
    assert metrics["stopped_because"] == measured.stopped_because
    assert metrics["until_ci"]["metric"] == "tpot_ms_p50" and len(metrics["trials"]) == len(measured.repeats)


def test_adaptive_stopping_hits_max_requests_and_cuts_the_last_round():
    wl = Workload(prompt_tokens=16, requests=8, until_ci_pct=0.01, max_requests=20)
    phase = fake_phase(10.0, spread=0.5)
    measured = repeats.measure(wl, phase, first_index=0)
    assert [c[2] for c in phase.calls] == [8, 8, 4]
    assert measured.stopped_because.startswith("max_requests 20 reached (ci ")


def test_adaptive_stopping_hits_max_seconds():
    wl = Workload(prompt_tokens=16, requests=4, until_ci_pct=0.01, max_seconds=1e-9)
    measured = repeats.measure(wl, fake_phase(10.0), first_index=0)
    assert len(measured.repeats) == 1 and measured.stopped_because.startswith("max_seconds 1e-09 reached")


def test_without_a_limit_the_default_cap_applies():
    wl = Workload(prompt_tokens=16, requests=500, until_ci_pct=0.001)
    assert wl.request_cap == 1000
    measured = repeats.measure(wl, fake_phase(10.0, spread=0.5, output_tokens=3), first_index=0)
    assert len(measured.records) == 1000 and "max_requests 1000 reached" in measured.stopped_because


def test_trials_are_the_first_rounds_of_adaptive_stopping():
    wl = Workload(prompt_tokens=16, requests=6, trials=3, until_ci_pct=50.0)
    measured = repeats.measure(wl, fake_phase(10.0), first_index=0)
    assert len(measured.repeats) == 3  # the interval was narrow after round 1, yet 3 trials ran


def test_the_watched_metric_and_too_few_samples():
    phase = fake_phase(10.0)
    records, _, _ = phase(0, 0, 4)
    assert repeats.ci_half_width_pct(records, "tpot_ms.p50") is None  # p50 needs 6
    records, _, _ = phase(0, 0, 40)
    assert repeats.ci_half_width_pct(records, "itl_ms.p90") is not None  # ITL pools every gap
    assert repeats.metric_samples(records, "ttft_ms")[0] == 20.0


def test_measuring_note():
    assert repeats.measuring_note(Workload(prompt_tokens=16, trials=2)) == "2 trials of 8 request(s) in batches of 1"
    note = repeats.measuring_note(Workload(prompt_tokens=16, until_ci_pct=2))
    assert note.endswith("rounds until tpot_ms_p50 is within +-2 %")
