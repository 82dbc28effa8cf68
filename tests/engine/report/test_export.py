"""Exports: self-contained HTML, CSV tables, JSON with raw stamps, and the export verb."""

from __future__ import annotations

import csv
import io
import json
import re

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

NETWORK_SOURCE = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


def _self_contained(text: str) -> None:
    """One inlined copy of plotly.js, and nothing the page would fetch from the network."""
    assert text.startswith("<!DOCTYPE html>")
    assert "Plotly.newPlot" in text
    assert text.count("<script src=") == 0
    assert len(text) > 1_000_000  # plotly.js inlined
    assert text.count("* plotly.js v") == 1  # its licence header: exactly one embedded copy
    assert NETWORK_SOURCE.search(text) is None, NETWORK_SOURCE.search(text)
    assert "url(http" not in text and "@import" not in text


def test_comparison_html_and_csv(db):
    ids = seed_basic(db)
    runs, missing = load_runs(db, [ids["base"], ids["fast"], ids["synth"], 99999])
    assert missing == [99999]
    html = comparison_html(runs, load_requests(db, [r.id for r in runs]), ids["base"], link="http://x/compare?runs=1")
    _self_contained(html)
    assert "run 2 · INT4 · bfloat16: " in html and "faster decode" in html and "http://x/compare?runs=1" in html
    rows = list(csv.reader(io.StringIO(comparison_csv(runs, ids["base"]))))
    assert rows[0][:3] == ["metric", "unit", "better"]
    assert any(r[0] == "perplexity" for r in rows)
    # real quality dicts: the bookkeeping (window, stride, kl_top_k, ...) is never a row, every row has a direction
    names = [r[0] for r in rows[1:]]
    for word in ("window", "stride", "kl top k", "kl positions", "corpus tokens", "baseline perplexity", "nll"):
        assert not any(word in n for n in names), word
    assert {r[2] for r in rows[1:]} == {"lower", "higher"}
    table = html.split("<h2>Metrics</h2>")[1].split('<p class="meta">')[0]
    assert "window" not in table.lower() and "perplexity" in table


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
    assert (
        float(tpot[f"#{fast} CI low"]) < float(tpot[f"run {fast} · INT4 · bfloat16"]) < float(tpot[f"#{fast} CI high"])
    )
    assert float(tpot[f"#{fast} ratio CI high"]) < 1.0 and tpot[f"#{fast} verdict"] == "better"
    assert tpot[f"#{old} verdict"] == "worse" and tpot[f"#{old} CI low"] != ""  # computed from its requests
    p99 = rows["TTFT p99"]
    assert (
        p99[f"run {fast} · INT4 · bfloat16"] == ""
        and p99[f"#{fast} ÷ baseline"] == ""
        and p99[f"#{fast} verdict"] == "thin"
    )

    data = json.loads(runs_json(runs, requests))
    group = data[0]["tpot_ms"]
    assert group["p99"] > 0 and group["supported"]["p99"] is False and group["supported"]["p50"] is True
    assert group["n"] == 6 and group["ci"]["p99"] is None and len(group["ci"]["p50"]) == 2
    assert data[2]["tpot_ms"]["ci"]["p50"] is not None  # the older run gets its intervals from its stamps
    assert len(data[0]["ci"]["output_tokens_per_s"]) == 2

    html = comparison_html(runs, requests, ids["base"])
    assert "n too small" in html and "95 % CI" in html and "better (significant)" in html


def test_report_opens_with_the_summary_then_environment_charts_and_table(db):
    from seed_runs import make_run

    ids = seed_basic(db)
    who = make_run(db, name="by alice", provenance={"host": "box1", "cpu": "Test CPU", "cpu_count": 2,
                                                    "python": "3.11.9", "packages": {"torch": "2.5.1"},
                                                    "git_commit": "abc1234"})  # fmt: skip
    run_ids = [ids["base"], ids["fast"], who]
    runs, _ = load_runs(db, run_ids)
    html = comparison_html(runs, load_requests(db, run_ids), ids["base"])
    _self_contained(html)
    order = [html.index(h) for h in ("<h2>Summary", "<h2>Environment", "<h2>Charts", "<h2>Metrics")]
    assert order == sorted(order)
    assert html.index("faster decode") < order[1]  # the PM summary's sentences come first
    environment = html[order[1] : order[2]]
    for text in ("box1", "Test CPU (2 cores)", "3.11.9", "torch 2.5.1", "abc1234", "test CPU", "cli:"):
        assert text in environment, text
    charts = html[order[2] : order[3]]
    assert charts.count("Plotly.newPlot") == 4 and "over the run (1 s windows)" in charts


def test_environment_names_who_ran_it(db):
    from dataclasses import replace

    from engine.report.export import environment_frame

    ids = seed_basic(db)
    (run,), _ = load_runs(db, [ids["base"]])
    frame = environment_frame([replace(run, submitted_by="alice@lab.example")])
    assert frame.loc[0, "run by"] == "alice@lab.example" and frame.loc[0, "date"].endswith(" UTC")


def test_a_report_of_eight_runs_stays_under_5_mb(db):
    """8 runs of 200 requests x 64 tokens (12,600 ITL gaps each): one plotly.js, thinned CDFs."""
    from seed_runs import make_run

    run_ids = [
        make_run(db, name=f"recipe {i}", n=200, ttft_ms=40 + i, tpot_ms=5 + i, seed=i, workload={"requests": 200})
        for i in range(8)
    ]
    # make_run's requests have 8 tokens; store longer ones for a realistic ITL sample
    runs, _ = load_runs(db, run_ids)
    requests = {}
    for i, run_id in enumerate(run_ids):
        from seed_runs import make_requests

        requests[run_id] = make_requests(n=200, ttft_ms=40 + i, tpot_ms=5 + i, output_tokens=64, seed=i)
    html = comparison_html(runs, requests, run_ids[0])
    _self_contained(html)
    size = len(html.encode("utf-8"))
    print(f"8-run report: {size:,} bytes")
    assert size < 5_000_000


def test_the_report_names_the_noise_flags_every_run_carried(db):
    """Issue 26, item 5: the HTML report left out the contention flags both runs carried."""
    from seed_runs import make_run

    flag = {"flag": "contention", "kind": "machine", "detail": "load average up to 3.7 on 2 cores"}
    ids = [make_run(db, seed=i, extra_metrics={"noise_flags": [flag]}) for i in range(2)]
    runs, _missing = load_runs(db, ids)
    html_text = comparison_html(runs, load_requests(db, ids), ids[0])
    section = html_text.split("<h3>Noise flags</h3>")[1].split("</ul>")[0]
    assert section.count("measured under contention: load average up to 3.7 on 2 cores") == 2
    assert f"run {ids[0]} · float32" in section and f"run {ids[1]} · float32" in section
