"""Pareto fronts that respect uncertainty and workload (issue 26, item 4).

Explore drew a 0.3 % perplexity gap that Compare calls not significant as a trade-off, on an auto-zoomed
axis without error bars, and put Optimize's trials (16→8 tokens × 4 requests) on one front with runs
of 64→16 × 8, without a word.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.report.figures import explore_scatter
from engine.report.front_verdicts import _dominated_on, overlap_front
from engine.report.fronts import group_differences, pareto_fronts


def _frame(rows: list[dict]) -> pd.DataFrame:
    base = {"engine": "transformers", "model": "demo", "workload.prompt_tokens": 64, "workload.output_tokens": 16}
    return pd.DataFrame([{**base, "workload.requests": 8, **r} for r in rows])


def test_a_gap_within_wide_intervals_is_not_enough_data_not_a_trade_off():
    # perplexity 0.3 % apart with per-run bands of ± 19 % (unpaired): the verdict cannot tell them apart
    frame = _frame(
        [
            {"run_id": 1, "tpot_ms_p50": 50.0, "tpot_ms_p50:lo": 48.0, "tpot_ms_p50:hi": 52.0,
             "quality.perplexity": 20.35, "quality.perplexity:lo": 16.5, "quality.perplexity:hi": 24.2},
            {"run_id": 2, "tpot_ms_p50": 95.0, "tpot_ms_p50:lo": 90.0, "tpot_ms_p50:hi": 99.0,
             "quality.perplexity": 20.40, "quality.perplexity:lo": 16.5, "quality.perplexity:hi": 24.3},
        ]
    )  # fmt: skip
    # run 1 is significantly faster and not significantly worse in perplexity: it dominates run 2
    fronts = pareto_fronts(frame, "tpot_ms_p50", "quality.perplexity")
    assert fronts.run_ids() == [1] and fronts.differences == []
    # a slightly faster run with the 0.3 % worse perplexity: on values a trade-off, by the verdict not enough data
    faster = frame.assign(
        **{"tpot_ms_p50": [50.0, 49.0], "tpot_ms_p50:lo": [48.0, 47.0], "tpot_ms_p50:hi": [52.0, 51.0]}
    )
    no_bars = faster.drop(columns=[c for c in faster if c.endswith((":lo", ":hi"))])
    assert sorted(pareto_fronts(no_bars, "tpot_ms_p50", "quality.perplexity").run_ids()) == [1, 2]
    unclear = pareto_fronts(faster, "tpot_ms_p50", "quality.perplexity")
    assert sorted(unclear.run_ids()) == [1, 2] and sorted(unclear.unclear["demo · 64-token prompts → 16"]) == [1, 2]
    assert (
        unclear.tied["demo · 64-token prompts → 16"] == []
    )  # "tied" is kept for a difference shown to lie within ± 5 %
    fig = explore_scatter(faster, "tpot_ms_p50", "quality.perplexity")
    line = next(t for t in fig.data if t.name == "Pareto front")
    assert len(line.x) == 0  # no line drawn between two runs the data cannot tell apart: rings instead
    assert any(t.name == "front: not enough data to tell apart" for t in fig.data)


def test_points_within_the_margin_on_both_axes_are_tied():
    frame = _frame(
        [
            {"run_id": 1, "tpot_ms_p50": 50.0, "tpot_ms_p50:lo": 49.5, "tpot_ms_p50:hi": 50.5,
             "output_tokens_per_s": 20.0, "output_tokens_per_s:lo": 19.8, "output_tokens_per_s:hi": 20.2},
            {"run_id": 2, "tpot_ms_p50": 50.4, "tpot_ms_p50:lo": 49.9, "tpot_ms_p50:hi": 50.9,
             "output_tokens_per_s": 19.9, "output_tokens_per_s:lo": 19.7, "output_tokens_per_s:hi": 20.1},
        ]
    )  # fmt: skip
    fronts = pareto_fronts(frame, "tpot_ms_p50", "output_tokens_per_s")
    assert sorted(fronts.run_ids()) == [1, 2] and sorted(fronts.tied[next(iter(fronts.tied))]) == [1, 2]
    fig = explore_scatter(frame, "tpot_ms_p50", "output_tokens_per_s")
    names = [t.name for t in fig.data]
    assert "front: tied: no significant difference (within ± 5 %)" in names
    points = next(t for t in fig.data if t.name == "runs")
    assert list(points.error_x.array) == pytest.approx([0.5, 0.5]) and list(points.error_y.arrayminus) == pytest.approx(
        [0.2, 0.2]
    )
    assert "TPOT p50 (GenAI-Perf: ITL): 50.0 ms (95 % CI 49.5–50.5)" in points.text[0]  # the interval on hover


def test_fronts_are_drawn_per_workload_and_trials_are_marked():
    frame = _frame(
        [
            {"run_id": 1, "tpot_ms_p50": 50.0, "quality.perplexity": 20.0},
            {"run_id": 2, "tpot_ms_p50": 40.0, "quality.perplexity": 21.0},
            {"run_id": 3, "tpot_ms_p50": 10.0, "quality.perplexity": 25.0, "workload.prompt_tokens": 16,
             "workload.output_tokens": 8, "workload.requests": 4, "trial": "study smol trial 1"},
        ]
    )  # fmt: skip
    fronts = pareto_fronts(frame, "tpot_ms_p50", "quality.perplexity")
    assert len(fronts.groups) == 2
    assert fronts.differences == ["workload: 16-token prompts → 8; 64-token prompts → 16"]
    assert group_differences(frame.iloc[:2]) == []  # 8 requests or 4: the same workload
    fig = explore_scatter(frame, "tpot_ms_p50", "quality.perplexity")
    names = [t.name for t in fig.data]
    assert (
        "Pareto front: demo · 64-token prompts → 16" in names and "Pareto front: demo · 16-token prompts → 8" in names
    )
    trial = next(t for t in fig.data if t.name == "Optimize trial")
    assert [c[0] for c in trial.customdata] == [3] and trial.text == ("study smol trial 1",)


def test_the_fast_domination_check_agrees_with_a_brute_force_one():
    rng = np.random.default_rng(4)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        x, y = rng.normal(size=n), rng.normal(size=n)
        wx, wy = rng.uniform(0, 0.5, size=n), rng.uniform(0, 0.5, size=n)
        got = _dominated_on((x - wx, x + wx), (y - wy, y + wy))
        want = [any(x[j] + wx[j] < x[i] - wx[i] and y[j] - wy[j] <= y[i] + wy[i] for j in range(n)) for i in range(n)]
        assert got.tolist() == want
    on, tied = overlap_front((-x, -x - wx, -x + wx), (y, y - wy, y + wy))
    assert on.any() and not (tied & ~on).any()
