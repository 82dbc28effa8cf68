"""Figure builders without Streamlit."""

from __future__ import annotations

import pandas as pd
import pytest
from seed_runs import seed_basic

from engine.report.figures import explore_scatter, front_run_ids, sweep_curves
from engine.report.fronts import pareto_fronts, with_intervals
from storage.frames import figure_records, runs_frame


def test_explore_scatter_groups_front_and_hover(db):
    ids = seed_basic(db)
    plain = runs_frame(db)
    records = figure_records(db, plain["run_id"].tolist())  # what Explore reads: intervals, standard errors
    frame = with_intervals(plain, ["tpot_ms_p50", "quality.perplexity"], records)
    fronts = pareto_fronts(frame, "tpot_ms_p50", "quality.perplexity", records=records)
    fig = explore_scatter(
        frame, "tpot_ms_p50", "quality.perplexity", color="recipe.dtype", symbol="model", fronts=fronts
    )
    names = [t.name for t in fig.data]
    assert "Pareto front" in names
    points = [t for t in fig.data if not t.name.startswith("Pareto front")]
    run_ids = {c[0] for t in points for c in t.customdata}
    # the synthetic and the failed runs have no perplexity
    assert run_ids == {ids["base"], ids["fast"]}
    assert any("bfloat16" in n for n in names)
    assert "bfloat16" in " ".join(t for tr in points for t in tr.text)
    front = [t for t in fig.data if t.name == "Pareto front"][0]
    # 2.6x faster decode (significant) and perplexity +0.4 % with ± 24 % intervals (not significantly worse):
    # the fast run dominates, as Compare's verdicts on the pair say
    assert {c[0] for c in front.customdata} == {ids["fast"]}
    assert "lower is better" in fig.layout.xaxis.title.text
    # without the runs' intervals nothing can be told apart: both on the front, ringed, no line
    bare = explore_scatter(plain, "tpot_ms_p50", "quality.perplexity")
    assert not [t for t in bare.data if t.name == "Pareto front"][0].customdata
    rings = [t for t in bare.data if t.name == "front: not enough data to tell apart"][0]
    assert {c[0] for c in rings.customdata} == {ids["base"], ids["fast"]}


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
    assert len([t for t in fig.data if not t.name.startswith("Pareto front")]) <= 12


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


def _task_runs(db, kind: str, scores: tuple[float, float, float]) -> dict[str, int]:
    """Three runs: fast and worst on the task, medium, slow and best on the task."""
    from seed_runs import make_run, real_quality

    return {
        name: make_run(db, name=name, tpot_ms=tpot, seed=i, quality=real_quality(tasks={"t": (score, kind)}))
        for i, (name, tpot, score) in enumerate(zip(("fast", "medium", "slow"), (8, 12, 20), scores, strict=True))
    }


@pytest.mark.parametrize("kind", ["lm-eval acc_norm,none", "lm-eval acc,none", "multiple choice", "exact match"])
def test_front_maximises_task_accuracy(db, kind):
    ids = _task_runs(db, kind, (0.30, 0.20, 0.60))  # medium is slower and worse than fast: dominated
    frame = runs_frame(db)
    assert set(front_run_ids(frame, "tpot_ms_p50", "quality.task:t")) == {ids["fast"], ids["slow"]}
    fig = explore_scatter(frame, "tpot_ms_p50", "quality.task:t")
    assert "higher is better" in fig.layout.yaxis.title.text and "[%]" in fig.layout.yaxis.title.text
    assert any(": 30.0%" in t for t in fig.data[0].text)  # the registry's one format, on hover


@pytest.mark.parametrize("kind", ["lm-eval word_perplexity,none", "lm-eval bits_per_byte,none"])
def test_front_minimises_perplexity_type_tasks(db, kind):
    ids = _task_runs(db, kind, (30.0, 20.0, 10.0))  # fast is worst, medium is not dominated, slow is best
    frame = runs_frame(db)
    assert set(front_run_ids(frame, "tpot_ms_p50", "quality.task:t")) == set(ids.values())
    fig = explore_scatter(frame, "tpot_ms_p50", "quality.task:t")
    title = fig.layout.yaxis.title.text
    assert "lower is better" in title and "%" not in title
    assert any(t.endswith("): 30.00") for t in fig.data[0].text), fig.data[0].text


@pytest.mark.parametrize(
    ("column", "maximise"),
    [
        ("quality.perplexity", False),
        ("quality.kl_mean", False),
        ("quality.kl_p99", False),
        ("quality.top1_agreement", True),
        ("quality.greedy_flip_rate", False),
    ],
)
def test_front_direction_of_every_fidelity_metric(column, maximise):
    frame = pd.DataFrame({"run_id": [1, 2], "tpot_ms_p50": [10.0, 20.0], column: [0.5, 0.9]})
    # run 2 is slower: it is on the front only when its higher value is better
    assert front_run_ids(frame, "tpot_ms_p50", column) == ([1, 2] if maximise else [1])


def test_axis_options_leave_bookkeeping_out(db):
    from engine.report.figures import axis_options

    seed_basic(db)
    perf, accuracy = axis_options(runs_frame(db))
    assert accuracy == [
        "quality.perplexity",
        "quality.kl_mean",
        "quality.kl_p99",
        "quality.top1_agreement",
        "quality.greedy_flip_rate",
    ]
    assert "tpot_ms_p50" in perf and "error_rate" in perf and "completed" not in perf


def test_hover_names_the_failure_rate(db):
    from seed_runs import make_run

    flaky = make_run(db, name="flaky", failed_requests=2)
    make_run(db, name="fine", seed=1)
    fig = explore_scatter(runs_frame(db), "tpot_ms_p50", "output_tokens_per_s")
    texts = {
        c[0]: t for tr in fig.data if tr.customdata is not None for c, t in zip(tr.customdata, tr.text, strict=True)
    }
    assert "2 of 6 requests failed (33%)" in texts[flaky]
    assert sum("failed" in t for t in texts.values()) == 1
