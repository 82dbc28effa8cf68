"""History page (AppTest, seeded database): the series, its bands, a change point with what changed, permalinks."""

from __future__ import annotations

import json

import pytest
from seed_runs import make_run, open_page, real_quality
from suite_seed import run_suite, suite_of

from storage.suites import fingerprints


@pytest.fixture
def seeded(db, db_url, monkeypatch):
    """Eight runs of one spec whose decode slows by 40 % after a commit, plus a suite entry and another spec."""
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    for i in range(8):
        prov = {"git_commit": "abc1234" if i < 4 else "def5678", "packages": {"torch": "2.13.0"}, "host": "test"}
        make_run(db, tpot_ms=10 if i < 4 else 14, seed=i, quality=real_quality(), provenance=prov)
    suite = suite_of([{"metric": "tpot_ms_p50", "max_regression_pct": 5}], {"bf16": {"dtype": "bfloat16"}}, "nightly")
    from storage.suites import save_suite

    save_suite(db, suite.name, suite.model_dump(mode="json"))
    run_suite(db, suite, {"bf16": {"dtype": "bfloat16"}}, tag="base")
    return max(fingerprints(db), key=lambda f: f.runs).fingerprint


def _figure(at) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def test_permalink_shows_the_series_and_the_change_point(seeded):
    at = open_page("views/history.py", fingerprint=seeded, metric="tpot_ms_p50")
    assert not at.exception
    fig = _figure(at)
    values = next(t for t in fig["data"] if t.get("mode") == "lines+markers")["y"]
    assert len(values) == 8
    assert "git abc1234 → def5678" in fig["layout"]["annotations"][0]["text"]
    text = "\n".join(m.value for m in at.markdown)
    assert "between run 4 and run 5: git abc1234 → def5678" in text
    assert any(t.get("name") == "95 % interval" for t in fig["data"])  # runs now store their intervals
    assert at.code[-1].value.endswith(f"/history?fingerprint={seeded}&metric=tpot_ms_p50")


def test_changing_the_metric_updates_the_link(seeded):
    at = open_page("views/history.py", fingerprint=seeded)
    at.selectbox(key="history_metric").select("quality.perplexity").run()
    assert not at.exception and at.query_params["metric"] == "quality.perplexity"
    fig = _figure(at)
    assert any(t.get("name") == "95 % interval" for t in fig["data"])  # value ± 1.96 stderr


def test_a_suite_entry_link_and_bad_links(seeded):
    at = open_page("views/history.py", suite="nightly", entry="bf16")
    assert not at.exception and at.query_params["fingerprint"] != seeded
    assert len(next(t for t in _figure(at)["data"] if t.get("mode") == "lines+markers")["y"]) == 1
    at = open_page("views/history.py", fingerprint=seeded, metric="nonsense")
    assert not at.exception and "not measured" in " ".join(w.value for w in at.warning)


def test_a_link_to_a_fingerprint_not_stored_switches_to_no_other_series(seeded):
    """Issue 26, item 5: ``/history?fingerprint=zzz`` showed another series; now it asks for a pick."""
    at = open_page("views/history.py", fingerprint="zzz")
    assert not at.exception
    assert "No finished run has the fingerprint 'zzz'" in " ".join(w.value for w in at.warning)
    assert not at.get("plotly_chart") and at.query_params["fingerprint"] == "zzz"
    assert "Pick a series" in at.info[0].value
    at = open_page("views/history.py", suite="nightly", entry="nope")
    assert not at.exception and not at.get("plotly_chart")


def test_series_are_named_by_their_recipe_and_one_run_is_not_called_a_level(db, db_url, monkeypatch):
    """Issue 26, items 2 and 5: series differed only by a fingerprint hash; one run read as "one level"
    on a sub-millisecond time axis."""
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    make_run(db, recipe={"drop_layers": 2})
    make_run(db, recipe={"quantization": "torchao_int8_weight_only"}, seed=1)
    at = open_page("views/history.py")
    assert not at.exception
    options = at.selectbox(key="history_fingerprint").options
    assert any("drop 2 layers" in o for o in options)
    assert any("INT8 weight-only (torchao)" in o for o in options)
    text = "\n".join(m.value for m in at.markdown)
    assert "No change point" not in text and "Too few runs to look for a change: 1 run" in text
    fig = _figure(at)
    start, end = fig["layout"]["xaxis"]["range"]
    from datetime import datetime

    span = datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))
    assert span.total_seconds() >= 3600
    assert any(w in fig["layout"]["title"]["text"] for w in ("drop 2 layers", "INT8 weight-only (torchao)"))


def test_an_empty_database_says_what_to_do(db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = open_page("views/history.py")
    assert not at.exception and "No finished runs yet" in at.info[0].value
