"""Compare page (AppTest, seeded database): ratios, the PM summary, CDFs, exports, bad links."""

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


def open_compare(**params: str) -> AppTest:
    return open_page("views/compare.py", **params)


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_permalink_shows_summary_ratios_and_cdfs(seeded):
    ids = seeded
    at = open_compare(runs=f"{ids['base']},{ids['fast']},{ids['synth']}", baseline=str(ids["base"]))
    assert not at.exception
    text = markdown(at)
    assert "run 2 · INT4 · bfloat16: " in text and "faster decode (significant, 95 % CI " in text
    assert "perplexity: not enough data (95 % CI from 24 % better to 25 % worse)" in text
    assert "no accuracy (synthetic weights)" in text
    charts = at.get("plotly_chart")
    assert len(charts) == 3
    fig = json.loads(charts[0].proto.spec)
    assert len(fig["data"]) == 3 and "CDF" in fig["layout"]["title"]["text"]
    table = at.dataframe[0].value
    assert any(c.endswith("÷ baseline") for c in table.columns)
    assert len(at.get("download_button")) == 3
    link = at.code[-1].value
    assert link.endswith(f"/compare?runs={ids['base']}%2C{ids['fast']}%2C{ids['synth']}&baseline={ids['base']}")


def test_changing_baseline_updates_url_and_summary(seeded):
    ids = seeded
    at = open_compare(runs=f"{ids['base']},{ids['fast']}")
    at.selectbox(key="compare_baseline").select(ids["fast"]).run()
    assert not at.exception
    assert at.query_params["baseline"] == str(ids["fast"])
    assert "slower decode" in markdown(at)


@pytest.mark.parametrize("runs", ["1,,x", "999999", "abc", "", "5"])
def test_bad_links_are_friendly(seeded, runs):
    at = open_compare(runs=runs, baseline="zzz")
    assert not at.exception
    assert at.info or at.warning


def test_mixed_good_and_bad_ids(seeded):
    ids = seeded
    at = open_compare(runs=f"{ids['base']},,x,999999,{ids['failed']}", baseline="424242")
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "'x'" in warnings and "999999" in warnings and "baseline" in warnings
    assert "failed (out of memory while loading)" in markdown(at)


def test_more_than_eight_runs(seeded, db):
    from seed_runs import make_run

    extra = [make_run(db, seed=i) for i in range(8)]
    at = open_compare(runs=",".join(map(str, [seeded["base"], *extra])))
    assert not at.exception
    assert any("At most 8" in w.value for w in at.warning)
    assert len(json.loads(at.get("plotly_chart")[0].proto.spec)["data"]) == 8


@pytest.mark.slow
def test_real_demo_run_against_seeded(demo_run, monkeypatch):
    db, run_id = demo_run
    from seed_runs import make_run

    other = make_run(db, name="hand-made", tpot_ms=5)
    monkeypatch.setenv("LATENCYLAB_DB_URL", db.url)
    at = open_compare(runs=f"{run_id},{other}", baseline=str(run_id))
    assert not at.exception
    assert f"run {other} · hand-made · float32: " in markdown(at)


def test_summary_is_plain_and_says_what_differs_besides_the_recipe(seeded, db):
    from seed_runs import make_run

    small = make_run(db, name="A", ttft_ms=20, workload={"prompt_tokens": 16, "output_tokens": 4, "requests": 2})
    big = make_run(db, name="B", ttft_ms=52, workload={"prompt_tokens": 64, "output_tokens": 16, "requests": 4})
    at = open_compare(runs=f"{big},{small}", baseline=str(big))
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert f"run {small} · A · float32 differs from the baseline in more than its recipe" in warnings
    assert "prompt tokens 16 (baseline 64)" in warnings
    assert "caution, not the recipe alone" in markdown(at)

    at = open_compare(runs=f"{seeded['base']},{seeded['fast']}", baseline=str(seeded["base"]))
    text = markdown(at)
    assert "INT4 · bfloat16: 2.57× faster decode (significant, 95 % CI " in text
    assert "first token: not enough data (95 % CI from " in text
    assert "perplexity: not enough data (95 % CI from 24 % better to 25 % worse), peak memory -60 %" in text
    table = at.dataframe[0].value
    for word in ("window", "stride", "kl top k", "corpus tokens", "baseline perplexity"):
        assert not any(word in m for m in table["metric"]), word
    assert not at.warning


def test_table_has_intervals_verdicts_and_says_n_too_small(seeded, db):
    """6 requests a run: p50 has an interval, p90/p99 are "n too small" with no ratio; decode is a real change."""
    at = open_compare(runs=f"{seeded['base']},{seeded['fast']}", baseline=str(seeded["base"]))
    assert not at.exception
    fast = seeded["fast"]
    table = at.dataframe[0].value.set_index("metric")
    assert {f"#{seeded['base']} 95 % CI", f"#{fast} 95 % CI", f"#{fast} ÷ baseline", f"#{fast} verdict"} <= set(
        table.columns
    )
    tpot = table.loc["TPOT p50 (GenAI-Perf: ITL)"]
    assert tpot[f"#{fast} verdict"] == "better (significant)"
    assert re.fullmatch(r"0\.\d\d× \(95 % CI 0\.\d\d–0\.\d\d\)", tpot[f"#{fast} ÷ baseline"])
    assert re.fullmatch(r"\d+\.\d+–\d+\.\d+", tpot[f"#{fast} 95 % CI"])
    p99 = table.loc["TTFT p99"]
    assert p99[f"run {fast} · INT4 · bfloat16"] == "n too small" and p99[f"#{fast} ÷ baseline"] == "–"
    assert p99[f"#{fast} verdict"] == "not enough data (n=6, p99 needs 299)"
    assert table.loc["TTFT p50", f"#{fast} verdict"] == "not enough data"  # spans 1, wider than ± 5 %
    assert table.loc["perplexity", f"#{fast} verdict"] == "not enough data"
    memory = table.loc["peak memory (measured phase)"]
    assert memory["unit"] == "" and memory[f"run {fast} · INT4 · bfloat16"] == "200.0 MiB"  # the cell says MiB
    assert "n too small" in " ".join(c.value for c in at.caption)


def test_a_run_measured_on_a_busy_machine_or_by_a_client_that_set_the_pace_is_warned_about(seeded, db):
    from seed_runs import make_run

    flag = {"flag": "client_bound", "kind": "machine", "detail": "the client set the pace: its event loop ran late"}
    bound = make_run(db, name="bound", extra_metrics={"noise_flags": [flag]})
    at = open_compare(runs=f"{seeded['base']},{bound}", baseline=str(seeded["base"]))
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any(
        "Noise flags" in w and "client-bound (the client set the pace): the client set the pace" in w for w in warnings
    )


def test_without_a_baseline_in_the_link_the_engine_defaults_run_is_the_baseline(db, db_url, monkeypatch):
    """Issue 26, item 1: runs ticked newest first made the INT8 run the baseline, and the summary read
    "quantization none: ... weights +144 %" (the base recipe described against the optimisation);
    "Against run 1 (run 1):" repeated itself, and both selectors showed the same label."""
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    base = make_run(db, recipe={"dtype": "auto"}, tpot_ms=20, weights_memory=500 * 2**20)
    int8 = make_run(
        db, recipe={"dtype": "auto", "quantization": "torchao_int8_weight_only"}, tpot_ms=30, seed=1,
        weights_memory=205 * 2**20,
    )  # fmt: skip
    at = open_compare(runs=f"{int8},{base}")  # the Runs table lists (and ticks) the newest first
    assert not at.exception
    assert at.query_params["baseline"] == str(base)
    text = markdown(at)
    assert f"Against the baseline, **run {base} · engine defaults**:" in text
    assert f"- run {int8} · INT8 weight-only (torchao): " in text and "weights -59 %" in text
    assert "(run " not in text and "quantization none" not in text
    assert "its recipe is the engine's defaults" in " ".join(c.value for c in at.caption)
    labels = at.selectbox(key="compare_baseline").options  # as shown
    assert len(set(labels)) == 2 and any("INT8 weight-only (torchao)" in label for label in labels)
    picked = at.multiselect(key="compare_runs").options
    assert len(set(picked)) == len(picked) == 2


def test_the_noise_flags_of_compared_runs_are_shown(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    flag = {"flag": "contention", "kind": "machine", "detail": "load 3.4 on 2 cores"}
    a, b = make_run(db, extra_metrics={"noise_flags": [flag]}), make_run(db, seed=1)
    at = open_compare(runs=f"{a},{b}")
    warning = " ".join(w.value for w in at.warning)
    assert f"run {a} · float32**: measured under contention: load 3.4 on 2 cores" in warning


def test_the_decision_line_opens_the_page_and_one_click_queues_the_repeats(seeded, db):
    """Issue 34: a decision line per run; where it says to repeat, one click queues every compared spec again
    with the decision preset, the baseline first, in one go (operators only)."""
    from storage.jobs import list_jobs

    base, fast = seeded["base"], seeded["fast"]
    at = open_compare(runs=f"{fast},{base}", baseline=str(base))
    assert not at.exception
    assert [s.value for s in at.subheader][:2] == ["Decision", "Summary"]
    line = at.markdown[0].value
    assert line.startswith(f"- run {fast} · INT4 · bfloat16: 2.") and "faster decode (significant, 95 % CI " in line
    assert line.endswith("not enough data to decide on perplexity (measured once): repeat.")
    button = at.button(key="compare_repeat")
    assert not button.disabled and button.label == "Queue repeats to decide (6 jobs)"
    button.click().run()
    assert not at.exception and at.success and "Queued jobs " in at.success[0].value
    jobs = sorted(list_jobs(db), key=lambda j: j.id)
    assert [j.spec["name"] for j in jobs[:2]] == [
        f"FP32 baseline (repeat of run {base}) (trial 1 of 3)",
        f"INT4 (repeat of run {fast}) (trial 1 of 3)",
    ]
    assert len(jobs) == 6 and len({j.sweep for j in jobs}) == 1
    assert all(j.spec["workload"]["trials"] == 1 and j.status == "queued" for j in jobs)


def test_viewers_see_the_decision_but_cannot_queue_repeats(seeded, monkeypatch):
    from engine.settings import get_settings

    monkeypatch.setenv("LATENCYLAB_VIEWER_MODE", "1")
    get_settings.cache_clear()
    try:
        at = open_compare(runs=f"{seeded['base']},{seeded['fast']}", baseline=str(seeded["base"]))
        assert not at.exception and at.markdown[0].value.startswith("- run 2 · INT4 · bfloat16: ")
        assert at.button(key="compare_repeat").disabled
        assert any("Cannot queue repeats: viewer mode" in c.value for c in at.caption)
    finally:
        monkeypatch.delenv("LATENCYLAB_VIEWER_MODE")
        get_settings.cache_clear()
