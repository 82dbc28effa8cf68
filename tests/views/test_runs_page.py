"""AppTest smoke tests of the Runs page: the list, ?run=ID, and bad links."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def app(demo_run, monkeypatch):
    db, _run_id = demo_run
    monkeypatch.setenv("LATENCYLAB_DB_URL", db.url)
    return AppTest.from_file(APP, default_timeout=30)


def text_of(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [w.value for w in at.warning] + [e.value for e in at.error]
    parts += [s.value for s in at.subheader] + [t.value for t in at.title] + [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


@pytest.mark.slow
def test_lists_runs(app, demo_run):
    at = app.run()
    assert not at.exception
    assert "Runs" in text_of(at)
    frame = at.dataframe[0].value
    assert demo_run[1] in set(frame["link"].str.extract(r"(\d+)$")[0].astype(int))


@pytest.mark.slow
def test_opens_one_run(app, demo_run):
    app.query_params["run"] = str(demo_run[1])
    at = app.run()
    assert not at.exception
    assert "demo fixture" in text_of(at)
    labels = [m.label for m in at.metric]
    assert "TTFT p50" in labels and "TPOT p50" in labels


@pytest.mark.slow
@pytest.mark.parametrize(
    ("value", "fragment"),
    [("abc", "not a valid run id"), ("999999", "There is no run 999999"), ("-4", "not a valid run id")],
)
def test_bad_links_are_friendly(app, value, fragment):
    app.query_params["run"] = value
    at = app.run()
    assert not at.exception
    assert fragment in text_of(at)


def test_empty_database(monkeypatch, tmp_path):
    monkeypatch.setenv("LATENCYLAB_DB_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert "No runs yet" in text_of(at)


def _rows(at: AppTest):
    frame = at.dataframe[0].value
    return frame.set_index(frame["link"].str.extract(r"(\d+)$")[0].astype(int))


def test_failure_rate_and_reasons_in_the_list(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    flaky = make_run(db, name="flaky", failed_requests=3)
    fine = make_run(db, name="fine", seed=1)
    broken = make_run(db, name="broken", status="failed", error="out of memory while loading")
    mystery = make_run(db, name="mystery", status="failed")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    rows = _rows(at)
    assert rows.loc[flaky, "status"] == "done · 3 of 6 requests failed (50%)"
    assert rows.loc[fine, "status"] == "done"
    assert rows.loc[broken, "status"] == "failed: out of memory while loading"
    assert rows.loc[mystery, "status"] == "failed: no reason recorded"
    text_cells = rows.drop(columns=["link", "created_at"])
    assert not text_cells.astype(str).isin(["None", "nan"]).any().any()  # a missing value is blank, never "None"
    # the narrow status cell may cut a reason at 1440 px: the whole text is listed below the table
    below = " ".join(m.value for m in at.markdown)
    assert f"**run {broken}**: failed: out of memory while loading" in below
    assert f"**run {flaky}**: done · 3 of 6 requests failed (50%)" in below and f"**run {fine}**" not in below


def test_columns_recipe_in_words_and_accuracy(db, db_url, monkeypatch):
    from seed_runs import make_run, real_quality

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    plain = make_run(db, quality=real_quality(perplexity=16.44))
    tuned = make_run(db, dtype="bfloat16", batch_size=4, recipe={"attn_implementation": "sdpa"}, seed=1)
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    rows = _rows(at)
    assert list(rows.columns) == [
        "link", "created_at", "model", "engine", "device", "recipe", "workload",
        "ttft_ms_p50", "tpot_ms_p50", "output_tokens_per_s", "accuracy", "status", "noise",
    ]  # fmt: skip
    assert rows.loc[tuned, "recipe"] == "bfloat16 · sdpa attention"  # only what differs from the defaults
    assert rows.loc[plain, "recipe"] == "float32"
    assert rows.loc[tuned, "workload"] == "32-token prompts → 8 × 6 req · batch 4"
    assert rows.loc[plain, "accuracy"] == "ppl 16.44 · KL 0"
    assert float(rows.loc[plain, "ttft_ms_p50"]) > 0
    assert rows.loc[tuned, "accuracy"] == ""  # no accuracy measured: blank, not "None"


def test_sort_filter_and_search(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    slow = make_run(db, tpot_ms=30, seed=0)
    fast = make_run(db, tpot_ms=5, dtype="bfloat16", seed=1)
    synth = make_run(db, tpot_ms=15, model="synthetic:smollm2-135m", seed=2)
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.selectbox(key="runs_sort").select("tpot_ms_p50").run()
    assert list(_rows(at).index) == [fast, synth, slow]  # smallest first for a latency
    at.multiselect(key="runs_model").select("demo").run()
    assert list(_rows(at).index) == [fast, slow]
    at.text_input(key="runs_text").input("bfloat16").run()
    assert list(_rows(at).index) == [fast]
    at.text_input(key="runs_text").input("nothing like this").run()
    assert not at.exception and any("No runs match" in i.value for i in at.info)


def test_selected_rows_open_in_compare_and_explore(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    a, b = make_run(db, seed=0), make_run(db, seed=1, dtype="bfloat16")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert any("Tick rows" in c.value for c in at.caption)
    at.session_state["runs_table"] = {"selection": {"rows": [0, 1], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    links = {p.proto.label: p.proto.page for p in at.get("page_link")}
    compare = next(k for k in links if k.startswith("Compare the 2 selected runs"))
    explore = next(k for k in links if k.startswith("Explore the 2 selected runs"))
    assert "compare" in links[compare] and "explore" in links[explore]
    params = [p.proto.query_string for p in at.get("page_link")]
    assert f"runs={b}%2C{a}" in params or f"runs={b},{a}" in params


def test_noise_column(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    flag = {"flag": "contention", "kind": "machine", "detail": "load 3.4 on 2 cores"}
    noisy = make_run(db, name="noisy", extra_metrics={"noise_flags": [flag]})
    old = make_run(db, name="old", seed=1)  # stored before noise flags existed
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    rows = _rows(at)
    assert rows.loc[noisy, "noise"] == "⚠ load 3.4 on 2 cores"
    assert rows.loc[old, "noise"] == ""  # blank: not recorded


def test_a_preset_recipe_is_named_by_the_preset_not_a_cut_off_knob(db, db_url, monkeypatch):
    """Issue 26, item 2: the recipe was a cut-off Runs column ("quantization torc...")."""
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    int8 = make_run(db, dtype="auto", recipe={"quantization": "torchao_int8_weight_only"})
    base = make_run(db, dtype="auto", seed=1)
    rows = _rows(AppTest.from_file(APP, default_timeout=30).run())
    assert rows.loc[int8, "recipe"] == "INT8 weight-only (torchao)" and rows.loc[base, "recipe"] == "engine defaults"
