"""History with one run (issue 34, item 9): its stored interval is drawn, and accuracy metrics are offered even when
the series measured none (the page then says how to measure them)."""

from __future__ import annotations

import json

from seed_runs import make_run, open_page, real_quality

from storage.suites import fingerprints


def _series(at) -> dict:
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    return next(t for t in fig["data"] if t.get("mode") == "lines+markers")


def test_one_run_shows_its_interval_and_accuracy_is_offered(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    make_run(db, quality=real_quality(perplexity=18.76))
    (fp,) = [f.fingerprint for f in fingerprints(db)]
    at = open_page("views/history.py", fingerprint=fp, metric="tpot_ms_p50")
    assert not at.exception
    bars = _series(at)["error_y"]
    assert bars["visible"] and bars["array"][0] > 0 and bars["arrayminus"][0] > 0  # the run's own 95 % interval
    options = at.selectbox(key="history_metric").options
    assert options.index("perplexity") < 6  # right after the headline latency figures, not at the end
    at.selectbox(key="history_metric").select("quality.perplexity").run()
    assert not at.exception and _series(at)["error_y"]["visible"]  # ± 1.96 standard errors


def test_a_series_without_accuracy_still_offers_it_and_says_how_to_measure_it(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    make_run(db)
    (fp,) = [f.fingerprint for f in fingerprints(db)]
    at = open_page("views/history.py", fingerprint=fp)
    assert "perplexity (not measured yet)" in at.selectbox(key="history_metric").options
    at.selectbox(key="history_metric").select("quality.perplexity").run()
    assert not at.exception and not at.get("plotly_chart")
    assert "No run of this series measured perplexity" in " ".join(i.value for i in at.info)
