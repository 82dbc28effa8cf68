"""Explore page (AppTest, seeded database): axes, colours, filters and the Pareto front from the URL."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
from seed_runs import make_run, open_page, real_quality, seed_basic
from streamlit.testing.v1 import AppTest


@pytest.fixture
def seeded(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    ids = seed_basic(db)
    for i, gap in enumerate((0, 30, 90)):
        make_run(db, sweep="rate", gap_ms=gap, seed=10 + i, model="synthetic:smollm2-135m")
    return ids


def open_explore(**params: str | list[str]) -> AppTest:
    return open_page("views/explore.py", **params)


def figure(at: AppTest) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def run_ids(fig: dict) -> set[int]:
    """Run ids of the scatter points (customdata may be a base64 typed array)."""
    out: set[int] = set()
    for trace in fig["data"]:
        if str(trace.get("name")).startswith(("Pareto front", "Optimize trial")) or "customdata" not in trace:
            continue
        data = trace["customdata"]
        if isinstance(data, dict):
            data = np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).reshape(-1, 1).tolist()
        out |= {int(row[0]) for row in data}
    return out


def test_permalink_state_reproduces_the_view(seeded):
    at = open_explore(x="tpot_ms_p50", y="quality.perplexity", color="recipe.dtype", symbol="model")
    assert not at.exception
    fig = figure(at)
    names = [t.get("name") for t in fig["data"]]
    assert "Pareto front" in names and any("bfloat16" in (n or "") for n in names)
    assert "perplexity" in fig["layout"]["yaxis"]["title"]["text"]
    assert at.selectbox(key="explore_x").value == "tpot_ms_p50"
    assert at.selectbox(key="explore_color").value == "recipe.dtype"
    link = at.code[-1].value
    assert "/explore?" in link and "x=tpot_ms_p50" in link and "color=recipe.dtype" in link
    # INT4's 0.4 % perplexity gap is within the runs' intervals: a tie, so the faster run alone is the front
    assert "Pareto front: 1 run" in [s.value for s in at.subheader]


def test_defaults_and_widget_changes_go_to_the_url(seeded):
    at = open_explore()
    assert not at.exception
    assert at.query_params["x"] == "tpot_ms_p50" and at.query_params["y"] == "quality.perplexity"
    at.selectbox(key="explore_y").select("output_tokens_per_s").run()
    assert at.query_params["y"] == "output_tokens_per_s"
    fig = figure(at)
    assert len(run_ids(fig)) == 6  # every finished run has both values


def test_filters_from_the_url(seeded):
    at = open_explore(y="output_tokens_per_s", model="demo", engine="transformers")
    assert not at.exception
    fig = figure(at)
    assert run_ids(fig) == {seeded["base"], seeded["fast"]}
    assert "model=demo" in at.code[-1].value and "engine=transformers" in at.code[-1].value
    at = open_explore(since="2999-01-01")
    assert not at.exception and any("No finished runs" in i.value for i in at.info)
    at = open_explore(since="yesterday", x="nonsense", color="nope")
    assert not at.exception and at.warning  # a bad date is ignored with a message, bad axes fall back


def test_sweep_view(seeded):
    at = open_explore(view="sweeps", sx="requests_per_s", sy="ttft_ms_p99")
    assert not at.exception
    fig = figure(at)
    assert [t["name"] for t in fig["data"]] == ["rate"] and len(fig["data"][0]["x"]) == 3


def test_empty_database(db_url, monkeypatch, db):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = open_explore()
    assert not at.exception and at.info


def test_axis_lists_hold_metrics_only(seeded):
    at = open_explore()
    assert not at.exception
    y_options = at.selectbox(key="explore_y").options
    x_options = at.selectbox(key="explore_x").options
    # the seeded runs carry real quality dicts (window, stride, kl_top_k, corpus_tokens, ...)
    for word in ("window", "stride", "kl top k", "kl positions", "corpus tokens", "baseline perplexity", "nll"):
        assert not any(word in o.lower() for o in y_options + x_options), word
    assert "perplexity" in y_options and "top-1 agreement vs reference" in y_options
    assert "failed requests" in x_options


def test_task_accuracy_front_and_failure_hover(db, db_url, monkeypatch):
    from seed_runs import real_quality

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    kind = "lm-eval acc_norm,none"
    # 8 requests a run: with one failed, the slow run keeps the 6 a p50 needs (with 5 its decode would be
    # "not enough data", and a run significantly better on one axis and not significantly worse on the
    # other dominates: the slow run alone would be the front)
    fast = make_run(db, name="fast", tpot_ms=8, n=8, quality=real_quality(tasks={"hellaswag": (0.30, kind)}))
    make_run(db, name="medium", tpot_ms=12, n=8, seed=1, quality=real_quality(tasks={"hellaswag": (0.20, kind)}))
    slow = make_run(
        db, name="slow", tpot_ms=20, n=8, seed=2, failed_requests=1,
        quality=real_quality(tasks={"hellaswag": (0.6, kind)}),
    )  # fmt: skip
    at = open_explore(x="tpot_ms_p50", y="quality.task:hellaswag")
    assert not at.exception
    assert "Pareto front: 2 runs" in [s.value for s in at.subheader]
    front = at.dataframe[0].value
    assert "run_id" not in front.columns  # one run-id column: the link
    assert set(front["open"].str.extract(r"(\d+)$")[0].astype(int)) == {fast, slow}  # the best accuracy, not the worst
    fig = figure(at)
    assert "higher is better" in fig["layout"]["yaxis"]["title"]["text"]
    hover = " ".join(t for trace in fig["data"] for t in trace.get("text", []))
    assert "1 of 8 requests failed (12%)" in hover


def test_hide_runs_measured_under_contention(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    flag = {"flag": "contention", "kind": "machine", "detail": "load 3.4 on 2 cores"}
    thin = {"flag": "short", "kind": "validity", "detail": "measured phase 0.40 s (under 1 s)"}
    noisy = make_run(db, name="noisy", extra_metrics={"noise_flags": [flag]})
    short = make_run(db, name="short", tpot_ms=12, seed=1, extra_metrics={"noise_flags": [thin]})
    old = make_run(db, name="old", tpot_ms=14, seed=2)  # no flags recorded: kept
    at = open_explore(y="output_tokens_per_s")
    assert not at.exception and run_ids(figure(at)) == {noisy, short, old}
    at.checkbox(key="explore_quiet").check().run()
    assert at.query_params["quiet"] == "1" and run_ids(figure(at)) == {short, old}
    at = open_explore(y="output_tokens_per_s", quiet="1")  # from a link
    assert at.checkbox(key="explore_quiet").value and run_ids(figure(at)) == {short, old}


def test_colour_defaults_to_the_knob_that_varies_most(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    for i, dtype in enumerate(("float32", "bfloat16", "auto")):
        make_run(db, dtype=dtype, seed=i, quality=real_quality(perplexity=16 + i))
    make_run(db, dtype="float32", batch_size=4, seed=9, quality=real_quality(perplexity=16.5))
    at = open_explore()
    assert not at.exception
    assert at.selectbox(key="explore_color").value == "recipe.dtype"  # 3 dtypes, 2 batch sizes, 1 engine
    names = {t.get("name") for t in figure(at)["data"]}
    assert {"float32", "bfloat16", "auto"} <= names


def test_colour_default_looks_only_at_the_plotted_runs_and_is_named_in_words(db, db_url, monkeypatch):
    from tests.views.test_loadcurve_page import seed_sweep

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    seed_basic(db)  # two runs with perplexity: float32 and bfloat16
    seed_sweep(db, "rates")  # rates vary most among all runs, but none of them has a perplexity
    at = open_explore(x="tpot_ms_p50", y="quality.perplexity")
    assert not at.exception
    colour = at.selectbox(key="explore_color")
    assert colour.value == "recipe.dtype" and "Precision (dtype)" in colour.options


def test_axes_units_hover_words_and_plurals(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    only = make_run(db, dtype="bfloat16", quality=real_quality(perplexity=17.0))
    at = open_explore(x="tpot_ms_p50", y="quality.perplexity")
    assert not at.exception
    x_options = at.selectbox(key="explore_x").options
    y_options = at.selectbox(key="explore_y").options
    # real metrics measured in these runs only: no task, no goodput (no SLO), no per-GPU figure on a CPU
    assert "goodput (requests/s meeting every SLO)" not in x_options and "perplexity" in y_options
    assert not any("task" in o or "hellaswag" in o for o in y_options)
    fig = figure(at)
    assert "[ms]" in fig["layout"]["xaxis"]["title"]["text"]
    point = next(t for t in fig["data"] if t.get("name") != "Pareto front")
    assert re.search(r"TPOT p50 \(GenAI-Perf: ITL\): [\d.]+ ms \(95 % CI [\d.]+–[\d.]+\)", point["text"][0])
    assert "bfloat16" in point["text"][0]  # the recipe in words
    assert "Pareto front: 1 run" in [s.value for s in at.subheader]
    assert any("1 of 1 run has both values" in c.value for c in at.caption)
    at = open_explore(runs=str(only))
    assert not at.exception and run_ids(figure(at)) == {only}


def test_runs_parameter_limits_the_view(seeded):
    at = open_explore(runs=f"{seeded['base']},{seeded['fast']}", y="output_tokens_per_s")
    assert not at.exception
    assert run_ids(figure(at)) == {seeded["base"], seeded["fast"]}


def test_a_link_with_an_older_metric_spelling_opens_the_same_axes(seeded):
    at = open_explore(x="tpot_ms.p50", y="tokens_per_s")
    assert not at.exception
    assert at.selectbox(key="explore_x").value == "tpot_ms_p50"
    assert at.selectbox(key="explore_y").value == "output_tokens_per_s"
    assert at.query_params["x"] == "tpot_ms_p50"  # the link is rewritten in the one spelling


def test_trials_of_another_workload_get_their_own_front_a_warning_and_a_mark(db, db_url, monkeypatch):
    """Issue 26, item 4: Optimize's trials (16→8 × 4 requests) were put on one front with runs of 64→16 × 8,
    without a word, and points had no error bars."""
    from storage import studies

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    big = {"prompt_tokens": 64, "output_tokens": 16, "requests": 8}
    small = {"prompt_tokens": 16, "output_tokens": 8, "requests": 4}
    make_run(db, tpot_ms=20, workload=big, n=8)
    make_run(db, tpot_ms=12, workload=big, n=8, seed=1, recipe={"drop_layers": 2})
    trial_run = make_run(db, tpot_ms=6, workload=small, n=6, seed=2)
    study = studies.create_study(db, "smol", {"name": "smol"}, submitted_by="test")
    trial = studies.add_trial(db, study.id, 1, {"dtype": "auto"}, status="complete")
    studies.update_trial(db, trial.id, run_id=trial_run)
    at = open_explore(x="tpot_ms_p50", y="output_tokens_per_s")
    assert not at.exception
    warning = " ".join(w.value for w in at.warning)
    assert (
        "one front is drawn per model and workload" in warning
        and "16-token prompts → 8; 64-token prompts → 16" in warning
    )
    fig = figure(at)
    names = [t.get("name") for t in fig["data"]]
    assert "Optimize trial" in names and sum(str(n).startswith("Pareto front: demo") for n in names) >= 2
    points = [t for t in fig["data"] if "customdata" in t and not str(t.get("name")).startswith(("Pareto", "Optimize"))]
    assert points and all("error_x" in t and "error_y" in t for t in points)
    table = at.dataframe[0].value
    assert "None" not in table["run name"].tolist() and "study smol trial 1" in table["Optimize trial"].tolist()
