"""The summarising fast path (issue 24) gives the figures the straightforward code gave before it.

``data/summary_before.json`` holds :func:`compute_metrics` of :func:`mixed_run` (and of its
first requests, with an SLO) as computed by the code before the fast path, so any change to a
figure, an interval or a count shows up here.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from engine.measure.metrics import SLO, compute_metrics
from engine.measure.records import RequestRecord, RunRecord

MS = 1_000_000
BEFORE = Path(__file__).parent / "data" / "summary_before.json"


def mixed_run(n: int = 420, seed: int = 7) -> RunRecord:
    """Warm-up, failures, cancellations, multi-token and empty chunks, one-token replies, queueing."""
    rng = random.Random(seed)
    requests = []
    for i in range(n):
        arrival = i * 3 * MS
        send = arrival + rng.randint(0, 4 * MS)
        stamps, tokens = [], []
        t = send + int(rng.uniform(40, 160) * MS)
        for _ in range(1 if i % 37 == 5 else rng.randint(2, 24)):
            stamps.append(t)
            tokens.append(0 if rng.random() < 0.05 else (2 if rng.random() < 0.1 else 1))
            t += int(rng.uniform(5, 30) * MS)
        if i % 37 == 5:
            tokens = [1]
        requests.append(
            RequestRecord(
                index=i,
                arrival_ns=arrival,
                send_ns=send,
                prompt_tokens=rng.randint(10, 90),
                chunk_ns=stamps,
                chunk_tokens=tokens,
                error="HTTP 500: boom" if i % 53 == 11 else None,
                warmup=i < 4,
                cancelled=i % 71 == 13,
            )
        )
    end = max(r.chunk_ns[-1] for r in requests)
    return RunRecord(start_ns=requests[4].send_ns, end_ns=end, requests=requests, warmup_requests=4)


def figures() -> dict:
    run = mixed_run()
    small = RunRecord(run.start_ns, run.end_ns, run.requests[:60], 4)
    return {
        "full": compute_metrics(run),
        "small_slo": compute_metrics(small, SLO(ttft_ms=120.0, tpot_ms=20.0, e2el_ms=400.0)),
    }


def _same(a: object, b: object, where: str = "") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float | int) and not (math.isnan(a) and math.isnan(float(b))):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-12), where
    else:
        assert a == b or (a != a and b != b), where


def test_figures_are_the_ones_before_the_fast_path():
    before = json.loads(BEFORE.read_text())
    _same(before, json.loads(json.dumps(figures())))


if __name__ == "__main__":  # regenerate (only with the code whose figures are the reference)
    BEFORE.write_text(json.dumps(figures(), indent=1, sort_keys=True) + "\n")


def test_a_ratio_over_many_rows_resamples_groups_with_the_same_spread(monkeypatch):
    from engine.measure import stats

    rng = np.random.default_rng(3)
    rows = np.c_[rng.integers(20, 40, 30_000).astype(float), rng.uniform(0.5, 1.5, 30_000)]
    grouped = stats.bootstrap_ci(rows, stats.sum_ratio)
    monkeypatch.setattr(stats, "MAX_BOOTSTRAP_ROWS", 10**9)  # every row resampled, as before
    whole = stats.bootstrap_ci(rows, stats.sum_ratio)
    assert grouped is not None and whole is not None
    centre = rows[:, 0].sum() / rows[:, 1].sum()
    assert grouped.lo < centre < grouped.hi
    assert grouped.hi - grouped.lo == pytest.approx(whole.hi - whole.lo, rel=0.15)
