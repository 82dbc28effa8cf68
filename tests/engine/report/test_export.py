"""Exports: self-contained HTML, CSV tables, JSON with raw stamps, and the export verb."""

from __future__ import annotations

import csv
import io
import json

import pytest
from seed_runs import seed_basic

from engine.cli.main import main
from engine.report.export import (
    comparison_csv,
    comparison_html,
    explore_html,
    load_requests,
    load_runs,
    permalink,
    runs_json,
    table_csv,
)
from storage.frames import runs_frame


def _self_contained(text: str) -> None:
    assert text.startswith("<!DOCTYPE html>")
    assert "Plotly.newPlot" in text
    assert text.count("<script src=") == 0
    assert len(text) > 1_000_000  # plotly.js inlined


def test_comparison_html_and_csv(db):
    ids = seed_basic(db)
    runs, missing = load_runs(db, [ids["base"], ids["fast"], ids["synth"], 99999])
    assert missing == [99999]
    html = comparison_html(runs, load_requests(db, [r.id for r in runs]), ids["base"], link="http://x/compare?runs=1")
    _self_contained(html)
    assert "INT4: " in html and "faster decode" in html and "http://x/compare?runs=1" in html
    rows = list(csv.reader(io.StringIO(comparison_csv(runs, ids["base"]))))
    assert rows[0][:3] == ["metric", "unit", "better"]
    assert any(r[0] == "perplexity" for r in rows)
    # real quality dicts: the bookkeeping (window, stride, kl_top_k, ...) is never a row, every row has a direction
    names = [r[0] for r in rows[1:]]
    for word in ("window", "stride", "kl top k", "kl positions", "corpus tokens", "baseline perplexity", "nll"):
        assert not any(word in n for n in names), word
    assert {r[2] for r in rows[1:]} == {"lower", "higher"}
    assert "window" not in html.split("<h2>Distributions</h2>")[0].lower()


def test_explore_html(db):
    seed_basic(db)
    html = explore_html(runs_frame(db), "tpot_ms_p50", "output_tokens_per_s", color="recipe.dtype")
    _self_contained(html)
    assert "Runs on the Pareto front" in html


def test_runs_csv_has_metrics_and_failure_rate_not_bookkeeping(db):
    from seed_runs import make_run

    seed_basic(db)
    flaky = make_run(db, name="flaky", failed_requests=3)
    frame = runs_frame(db)
    rows = list(csv.DictReader(io.StringIO(table_csv(frame))))
    assert "quality.perplexity" in rows[0] and "error_rate" in rows[0]
    assert not any(k in rows[0] for k in ("quality.window", "quality.stride", "quality.kl_top_k"))
    assert float(next(r for r in rows if r["run_id"] == str(flaky))["error_rate"]) == 0.5


def test_runs_json_has_raw_stamps(db):
    ids = seed_basic(db)
    runs, _ = load_runs(db, [ids["base"]])
    data = json.loads(runs_json(runs, load_requests(db, [ids["base"]])))
    assert data[0]["run_id"] == ids["base"] and data[0]["ttft_ms"]["p50"] > 0
    req = data[0]["requests"][0]
    assert {"send_ns", "arrival_ns", "chunk_ns", "chunk_tokens", "warmup", "error"} <= set(req)
    assert isinstance(req["chunk_ns"][0], int)


def test_permalink():
    assert (
        permalink("http://h:8501/", "compare", {"runs": "1,2", "baseline": 1, "empty": ""})
        == "http://h:8501/compare?runs=1%2C2&baseline=1"
    )
    assert permalink("http://h", "/explore", {"model": ["a", "b"]}) == "http://h/explore?model=a&model=b"
    assert permalink("http://h", "run", {}) == "http://h/run"


def test_export_verb(db, db_url, tmp_path, capsys):
    ids = seed_basic(db)
    out = tmp_path / "r.html"
    assert main(["export", "--db", db_url, "--runs", f"{ids['base']},{ids['fast']}", "-o", str(out)]) == 0
    assert "INT4" in out.read_text()
    assert main(["export", "--db", db_url, "--all", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("run_id,") and len(lines) == 5
    assert main(["export", "--db", db_url, "--all", "--format", "html", "-o", str(out)]) == 0
    assert "Pareto front" in out.read_text()
    assert main(["export", "--db", db_url, "--runs", str(ids["fast"]), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["requests"]


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--runs", "1,,x"],
        ["export"],
        ["export", "--runs", "1", "--all"],
        ["export", "--runs", "424242"],
        ["export", "--runs", "1", "--baseline", "2"],
        ["export", "--all", "--x", "nope"],
    ],
)
def test_export_bad_input(db, db_url, argv, capsys):
    seed_basic(db)
    assert main([*argv, "--db", db_url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_runs_token_changes_when_runs_change(db):
    from seed_runs import make_run

    from storage.runs import delete_run, runs_token

    assert runs_token(db) == (0, 0)
    first = make_run(db)
    second = make_run(db)
    assert runs_token(db) == (2, second)
    delete_run(db, first)
    assert runs_token(db) == (1, second)


def test_exports_carry_intervals_and_never_an_unsupported_percentile(db):
    """CSV: CI bounds, ratio bounds and verdict states, an empty p99; JSON: raw p99 kept, supported false; HTML."""
    from seed_runs import make_run

    ids = seed_basic(db)
    old = make_run(db, name="old", tpot_ms=30, without_intervals=True)  # stored before intervals
    run_ids = [ids["base"], ids["fast"], old]
    runs, _ = load_runs(db, run_ids)
    requests = load_requests(db, run_ids)
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(comparison_csv(runs, ids["base"], requests)))}
    fast = ids["fast"]
    tpot = rows["TPOT p50 (GenAI-Perf: ITL)"]
    assert float(tpot[f"#{fast} CI low"]) < float(tpot[f"#{fast} INT4"]) < float(tpot[f"#{fast} CI high"])
    assert float(tpot[f"#{fast} ratio CI high"]) < 1.0 and tpot[f"#{fast} verdict"] == "better"
    assert tpot[f"#{old} verdict"] == "worse" and tpot[f"#{old} CI low"] != ""  # computed from its requests
    p99 = rows["TTFT p99"]
    assert p99[f"#{fast} INT4"] == "" and p99[f"#{fast} ÷ baseline"] == "" and p99[f"#{fast} verdict"] == "thin"

    data = json.loads(runs_json(runs, requests))
    group = data[0]["tpot_ms"]
    assert group["p99"] > 0 and group["supported"]["p99"] is False and group["supported"]["p50"] is True
    assert group["n"] == 6 and group["ci"]["p99"] is None and len(group["ci"]["p50"]) == 2
    assert data[2]["tpot_ms"]["ci"]["p50"] is not None  # the older run gets its intervals from its stamps
    assert len(data[0]["ci"]["output_tokens_per_s"]) == 2

    html = comparison_html(runs, requests, ids["base"])
    assert "n too small" in html and "95 % CI" in html and "significantly better" in html
