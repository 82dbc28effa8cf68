"""Figure builders without Streamlit."""

from __future__ import annotations

import pandas as pd
from seed_runs import make_requests, seed_basic

from engine.report.figures import (
    cdf_figure,
    explore_scatter,
    front_run_ids,
    histogram_figure,
    latency_samples,
    sweep_curves,
    timeline_figure,
)
from storage.frames import runs_frame


def test_explore_scatter_groups_front_and_hover(db):
    ids = seed_basic(db)
    frame = runs_frame(db)
    fig = explore_scatter(frame, "tpot_ms_p50", "quality.perplexity", color="recipe.dtype", symbol="model")
    names = [t.name for t in fig.data]
    assert "Pareto front" in names
    points = [t for t in fig.data if t.name != "Pareto front"]
    run_ids = {c[0] for t in points for c in t.customdata}
    # the synthetic and the failed runs have no perplexity
    assert run_ids == {ids["base"], ids["fast"]}
    assert any("bfloat16" in n for n in names)
    assert "dtype bfloat16" in " ".join(t for tr in points for t in tr.text)
    front = [t for t in fig.data if t.name == "Pareto front"][0]
    assert {c[0] for c in front.customdata} == {ids["base"], ids["fast"]}  # faster vs better perplexity
    assert "lower is better" in fig.layout.xaxis.title.text


def test_front_directions(db):
    ids = seed_basic(db)
    frame = runs_frame(db)
    # TPOT (minimise) vs tokens/s (maximise): the fast run dominates
    assert front_run_ids(frame, "tpot_ms_p50", "output_tokens_per_s") == [ids["fast"]]
    assert set(front_run_ids(frame, "tpot_ms_p50", "output_tokens_per_s", minimise_x=False, minimise_y=True)) == {
        ids["base"]
    }


def test_scatter_empty_and_missing_columns():
    assert len(explore_scatter(pd.DataFrame(), "a", "b").data) == 0
    frame = pd.DataFrame({"run_id": [1], "tpot_ms_p50": [None], "ttft_ms_p50": [1.0]})
    assert len(explore_scatter(frame, "tpot_ms_p50", "ttft_ms_p50").data) == 0


def test_many_colours_are_capped():
    frame = pd.DataFrame({"run_id": range(40), "x": range(40), "y": range(40), "k": [f"v{i}" for i in range(40)]})
    fig = explore_scatter(frame, "x", "y", color="k")
    assert len([t for t in fig.data if t.name != "Pareto front"]) <= 12


def test_sweep_curves(db):
    from seed_runs import make_run

    for i, gap in enumerate((0, 20, 60)):
        make_run(db, sweep="rate-a", gap_ms=gap, seed=i)
        make_run(db, sweep="rate-b", gap_ms=gap, tpot_ms=5, seed=i)
    make_run(db)  # not in a sweep
    fig = sweep_curves(runs_frame(db), "requests_per_s", "ttft_ms_p99")
    assert [t.name for t in fig.data] == ["rate-a", "rate-b"]
    xs = list(fig.data[0].x)
    assert xs == sorted(xs) and len(xs) == 3


def test_cdf_histogram_timeline():
    reqs = make_requests(n=5, ttft_ms=30, tpot_ms=5, output_tokens=4)
    samples = latency_samples(reqs)
    assert len(samples["ttft_ms"]) == 5 and len(samples["tpot_ms"]) == 5 and len(samples["itl_ms"]) == 15
    fig = cdf_figure({"a": samples["ttft_ms"], "b": []}, "ttft_ms")
    assert len(fig.data) == 1 and fig.data[0].y[-1] == 1.0 and list(fig.data[0].x) == sorted(fig.data[0].x)
    assert "TTFT" in fig.layout.title.text
    hist = histogram_figure(samples["itl_ms"], "itl_ms")
    assert len(hist.data[0].x) == 15
    reqs[2].error = "boom"
    tl = timeline_figure(reqs)
    names = {t.name for t in tl.data}
    assert {"to first token", "decoding", "failed"} <= names
    first = [t for t in tl.data if t.name == "to first token"][0]
    assert min(first.base) == 0.0 and all(v > 20 for v in first.x)
    assert len(timeline_figure([]).data) == 0
