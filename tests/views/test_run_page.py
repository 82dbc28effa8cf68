"""Run page (AppTest, seeded database): cards, distributions, accuracy, failures, bad links."""

from __future__ import annotations

import json
import re

import pytest
from seed_runs import open_page, seed_basic
from streamlit.testing.v1 import AppTest


@pytest.fixture
def seeded(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    return seed_basic(db)


def open_run(value: str) -> AppTest:
    return open_page("views/run.py", run=value)


def _text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [w.value for w in at.warning] + [i.value for i in at.info]
    parts += [e.value for e in at.error] + [c.value for c in at.caption] + [s.value for s in at.subheader]
    return "\n".join(str(p) for p in parts)


def test_done_run(seeded):
    at = open_run(str(seeded["fast"]))
    assert not at.exception
    assert [m.label for m in at.metric][:2] == ["TTFT p50", "TPOT p50"]
    charts = at.get("plotly_chart")
    assert len(charts) == 9  # CDF + histogram for TTFT/TPOT/ITL, the timeline, the time series, the tokens
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in charts]
    assert any("CDF" in t for t in titles) and "Per-request timeline" in titles
    assert "Over the run" in titles and "Requested vs actual tokens" in titles
    text = _text(at)
    assert "dtype bfloat16" in text
    assert any("perplexity" in m.label.lower() for m in at.metric)
    assert f"/run?run={seeded['fast']}" in at.code[-1].value
    assert any(b.label == "Delete run" for b in at.button)


def test_synthetic_and_failed(seeded):
    at = open_run(str(seeded["synth"]))
    assert not at.exception and "synthetic" in _text(at)
    at = open_run(str(seeded["failed"]))
    assert not at.exception
    assert "out of memory while loading" in _text(at)
    assert not at.get("plotly_chart")


@pytest.mark.parametrize("value", ["999999", "abc", "-3", ""])
def test_bad_links_are_friendly(seeded, value):
    at = open_run(value)
    assert not at.exception
    if value:
        assert at.warning
    assert at.selectbox  # a picker to choose a run instead


def test_viewer_mode_hides_delete(seeded, monkeypatch):
    from engine.settings import get_settings

    monkeypatch.setenv("LATENCYLAB_VIEWER_MODE", "true")
    get_settings.cache_clear()
    try:
        at = open_run(str(seeded["base"]))
        assert not at.exception
        assert not any(b.label == "Delete run" for b in at.button)
    finally:
        monkeypatch.delenv("LATENCYLAB_VIEWER_MODE")
        get_settings.cache_clear()


def test_delete_run(seeded, db):
    from storage.runs import get_run

    at = open_run(str(seeded["synth"]))
    at.checkbox(key="confirm_delete").check().run()
    next(b for b in at.button if b.label == "Delete run").click().run()
    assert not at.exception
    assert get_run(db, seeded["synth"]) is None


@pytest.mark.slow
def test_real_demo_run(demo_run, monkeypatch):
    db, run_id = demo_run
    monkeypatch.setenv("LATENCYLAB_DB_URL", db.url)
    at = open_run(str(run_id))
    assert not at.exception
    assert len(at.get("plotly_chart")) == 10  # CDFs, histograms, timeline, over time, tokens, telemetry
    assert "demo fixture" in _text(at) or any("demo fixture" in s.value for s in at.subheader)


def test_failure_rate_beside_the_headline(seeded, db):
    from seed_runs import make_run

    flaky = make_run(db, name="flaky", failed_requests=2)
    at = open_run(str(flaky))
    assert not at.exception
    cards = {m.label: m.value for m in at.metric}
    assert cards["Failed requests"] == "33%"
    assert "2 of 6 requests failed (33%)" in _text(at)
    at = open_run(str(seeded["base"]))
    assert {m.label: m.value for m in at.metric}["Failed requests"] == "0%"
    assert "requests failed" not in _text(at)


def test_failed_run_without_a_reason(seeded, db):
    from seed_runs import make_run

    at = open_run(str(make_run(db, name="mystery", status="failed")))
    assert not at.exception
    text = _text(at)
    assert "no reason recorded" in text and "None" not in text


def test_task_scores_in_their_own_units(seeded, db):
    from seed_runs import make_run, real_quality

    tasks = {"wikitext": (21.5, "lm-eval word_perplexity,none"), "hellaswag": (0.4567, "lm-eval acc_norm,none")}
    at = open_run(str(make_run(db, name="tasks", quality=real_quality(tasks=tasks))))
    assert not at.exception
    table = at.dataframe[-1].value.set_index("task")
    # four digits, the trailing zero kept: one format for every place (20.40 beside 20.35, never 20.4)
    assert table.loc["wikitext", "score"] == "21.50" and table.loc["wikitext", "better"] == "lower"
    assert table.loc["hellaswag", "score"] == "45.7%" and table.loc["hellaswag", "better"] == "higher"


def test_a_run_named_like_markup_is_shown_literally(db, db_url, monkeypatch):
    import html

    from markdown_it import MarkdownIt
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    image = "![b](http://127.0.0.1:9/x.png)"
    run_id = make_run(db, name=image, status="failed", error=f"boom {image}")
    at = open_run(str(run_id))
    assert not at.exception
    rendered = "\n".join(MarkdownIt("commonmark").render(str(p)) for p in _text(at).split("\n"))
    assert "<img" not in rendered and html.unescape(rendered).count(image) >= 2


CONTENTION = {"flag": "contention", "kind": "machine", "detail": "load 3.4 on 2 cores"}
FEW = {"flag": "few_requests", "kind": "validity", "detail": "4 completed requests: p50 needs 6 for an interval"}


def test_noise_badges_under_the_title(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    noisy = make_run(db, name="noisy", extra_metrics={"noise_flags": [CONTENTION, FEW]})
    quiet = make_run(db, name="quiet", extra_metrics={"noise_flags": []})
    at = open_run(str(noisy))
    assert not at.exception
    badges = [b.proto.body for b in at.markdown if ":orange-badge" in b.proto.body or ":gray-badge" in b.proto.body]
    assert any("measured under contention: load 3.4 on 2 cores" in b and "orange" in b for b in badges)
    assert any("too few requests: 4 completed requests" in b and "gray" in b for b in badges)
    at = open_run(str(quiet))
    assert not at.exception and "badge" not in " ".join(m.proto.body for m in at.markdown)


def test_intervals_and_n_too_small_on_cards_and_table(seeded, db):
    """6 requests: p50 with its 95 % CI, p90 and above "n too small"; 4 requests: even p50 is."""
    from seed_runs import make_run

    at = open_run(str(seeded["base"]))
    assert not at.exception
    cards = {m.label: m for m in at.metric}
    assert cards["TPOT p50"].value.endswith(" ms") and cards["TPOT p50"].delta.startswith("95 % CI ")
    assert cards["Output tokens/s"].delta.startswith("95 % CI ")
    table = at.dataframe[0].value.set_index("metric")
    ttft = table.loc["TTFT [ms], n=6"]
    assert re.fullmatch(r"\d+\.\d+ \(\d+\.\d+–\d+\.\d+\)", ttft["p50"]), ttft["p50"]
    assert ttft["p90"] == ttft["p99"] == "n too small"
    assert "tokens/s per user" in _text(at) and "95 % CI" in _text(at)

    tiny = make_run(db, name="tiny", n=4)
    cards = {m.label: m for m in open_run(str(tiny)).metric}
    assert cards["TTFT p50"].value == "n too small" and cards["TTFT p50"].delta == "n=4"


def test_a_run_stored_before_intervals_gets_them_from_its_requests(seeded, db):
    from seed_runs import make_run

    old = make_run(db, name="old", without_intervals=True)
    at = open_run(str(old))
    assert not at.exception
    table = at.dataframe[0].value.set_index("metric")
    assert "(" in table.loc["TPOT (GenAI-Perf/AIPerf: ITL) [ms], n=6", "p50"]
    assert table.loc["TTFT [ms], n=6", "p99"] == "n too small"
    assert {m.label: m for m in at.metric}["TPOT p50"].delta.startswith("95 % CI ")


def _figure(at: AppTest, title: str) -> dict:
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(c for c in charts if c["layout"]["title"]["text"] == title)


def test_time_series_section(seeded):
    """Tokens/s in 1 s windows, requests in flight, TTFT per request and ITL per token, on one time axis."""
    at = open_run(str(seeded["base"]))
    assert not at.exception
    fig = _figure(at, "Over the run")
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles[:2] == ["output tokens/s in 1 s windows", "requests in flight"]
    assert titles[2].startswith("TTFT") and titles[3].startswith("ITL")
    kinds = [t["type"] for t in fig["data"]]
    assert kinds.count("scattergl") == 2  # TTFT and ITL points, each with a rolling median line
    assert "rolling median" in _text(at)


def test_small_sample_warnings_and_whole_number_count_axes(seeded):
    at = open_run(str(seeded["base"]))  # 6 requests
    warning = "\n".join(w.value for w in at.warning)
    assert "TTFT, 6 requests: p95 and p99 are the largest value; p90 is the 2nd largest value" in warning
    assert "not tail estimates (a 95 % interval needs 29 for p90, 59 for p95, 299 for p99)" in warning
    hist = _figure(at, "TTFT histogram (n=6)")
    assert hist["layout"]["yaxis"]["dtick"] == 1 and hist["layout"]["yaxis"]["tick0"] == 0
    tokens = _figure(at, "Requested vs actual tokens")
    assert [a["text"] for a in tokens["layout"]["annotations"] if a["text"].startswith("requested")] == [
        "requested 32",
        "requested 8",
    ]
    assert all(isinstance(d, int) and d >= 1 for d in (tokens["layout"]["yaxis"]["dtick"],))


CLIENT = {
    "processes": 2, "send_lag_ms_p50": 0.4, "send_lag_ms_p99": 31.0, "send_lag_ms_max": 40.0, "loop_lag_ms_p50": 0.9,
    "loop_lag_ms_p99": 7.5, "loop_lag_ms_max": 9.0, "cpu_share": 0.6, "cpu_share_max": 0.97, "cores": 2,
}  # fmt: skip
CLIENT_BOUND = {"flag": "client_bound", "kind": "machine", "detail": "the client set the pace: its event loop ran late"}


def test_a_client_bound_run_shows_its_badge_and_the_client_section(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    bound = make_run(db, name="bound", extra_metrics={"noise_flags": [CLIENT_BOUND], "client": CLIENT})
    at = open_run(str(bound))
    assert not at.exception
    bodies = " ".join(m.proto.body for m in at.markdown)
    assert "client-bound (the client set the pace): the client set the pace" in bodies and ":orange-badge" in bodies
    assert "event-loop lag: p50 0.90 ms, p99 7.50 ms" in bodies and "the busiest process 97%" in bodies
    assert any(e.label.startswith("Client (it set the pace") for e in at.expander)


def test_a_run_loaded_from_ray_nodes_names_each_node_and_its_clock_offset(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    nodes = [
        {"node_id": "a" * 40, "node_ip": "10.0.0.5", "processes": 1, "requests": 9, "clock_offsets_ns": [1_250_000],
         "rtt_us": [180.0]},
        {"node_id": "b" * 40, "node_ip": "10.0.0.6", "processes": 1, "requests": 7, "clock_offsets_ns": [-40_000],
         "rtt_us": [90.0]},
    ]  # fmt: skip
    sent = {"processes": 2, "requests": [9, 7], "nodes": nodes}
    run_id = make_run(db, name="spread", extra_metrics={"client": CLIENT}, provenance={"client_processes": sent})
    at = open_run(str(run_id))
    assert not at.exception
    bodies = " ".join(m.proto.body for m in at.markdown)
    assert "Load sent from 2 Ray nodes" in bodies
    assert "node 10.0.0.5 (aaaaaaaaaaaa): 1 process(es), 9 requests; clock offset +1.250 ms (± 0.090 ms)" in bodies
    assert "node 10.0.0.6 (bbbbbbbbbbbb): 1 process(es), 7 requests; clock offset -0.040 ms (± 0.045 ms)" in bodies


def test_the_title_names_the_recipe_not_the_long_model_label(db, db_url, monkeypatch):
    """Issue 26, item 2: every Run title read "demo (SmolLM2-135M-Instruct, Q4_1 GGUF ...)"; the recipe
    was only in a line below."""
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    pruned = make_run(db, dtype="auto", recipe={"drop_layers": 2})
    make_run(db, dtype="auto", recipe={"quantization": "torchao_int8_weight_only"}, seed=1)
    at = open_run(str(pruned))
    assert not at.exception
    assert at.subheader[0].value == f"run {pruned} · drop 2 layers"
    at = open_run("")
    labels = at.selectbox[0].options  # as shown
    assert any(label.endswith("INT8 weight-only (torchao)") for label in labels)
    assert any(label.endswith("drop 2 layers") for label in labels)


def test_a_stored_run_that_cannot_be_read_is_not_called_deleted(seeded, db):
    """Issue 26, item 6: a run whose row cannot be read was reported as "There is no run 10. It may have
    been deleted", which is not what happened."""
    from sqlalchemy import text

    with db.engine.begin() as conn:
        conn.execute(text("UPDATE runs SET spec_json = '{not json' WHERE id = :id"), {"id": seeded["fast"]})
    at = open_run(str(seeded["fast"]))
    assert not at.exception
    warning = " ".join(w.value for w in at.warning)
    assert f"Run {seeded['fast']} is stored, but its stored record cannot be read" in warning
    assert "deleted" not in warning
    at = open_page("views/compare.py", runs=f"{seeded['base']},{seeded['fast']}")
    assert "is stored, but its stored record cannot be read" in " ".join(w.value for w in at.warning)
