"""Predicted runs in fronts, figures, exports and History: never on a measured front or in a series, drawn hollow
and labelled predicted when overlaid, titled predicted in the HTML, marked in the CSV and JSON (band, label, link)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from seed_runs import AZURE_TRACE, make_predicted_run, make_run

from engine.report.export import comparison_csv, comparison_html, explore_html, load_requests, runs_json, table_csv
from engine.report.figures import explore_scatter
from engine.report.fronts import pareto_fronts, split_predicted
from engine.report.history import build_history, fingerprint_runs, history
from engine.report.predicted import with_prediction_columns
from storage.frames import RunQuery, figure_records, query_frame
from storage.runs import get_run, get_runs

TWIN = {"name": "azure", "workload": AZURE_TRACE, "n": 40}


@pytest.fixture
def runs(db):
    measured = make_run(db, ttft_ms=60, tpot_ms=20, **TWIN)
    slower = make_run(db, ttft_ms=80, tpot_ms=30, seed=5, **TWIN)
    predicted = make_predicted_run(db, ttft_ms=30, tpot_ms=5, **TWIN)  # far better: it would own a front
    return db, measured, slower, predicted


def _frame(db) -> pd.DataFrame:
    frame = query_frame(db, RunQuery(predicted=None))
    predicted = frame[frame["predicted"]]
    return pd.concat(
        [frame[~frame["predicted"]], with_prediction_columns(predicted, get_runs(db, list(predicted["run_id"])))]
    )


def test_a_predicted_run_never_enters_a_front(runs):
    db, measured, slower, predicted = runs
    frame = _frame(db)
    kept, apart = split_predicted(frame)
    assert list(apart["run_id"]) == [predicted] and predicted not in set(kept["run_id"])
    records = figure_records(db, list(frame["run_id"]))  # what Explore judges with: every run's, the prediction's too
    fronts = pareto_fronts(frame, "tpot_ms_p50", "ttft_ms_p50", records=records)
    assert fronts.run_ids() == [measured]  # the far better prediction neither joins nor pushes anyone off


def test_the_scatter_draws_predicted_runs_hollow_and_labelled(runs):
    db, measured, _, predicted = runs
    frame = _frame(db)
    fronts = pareto_fronts(frame, "tpot_ms_p50", "ttft_ms_p50", records=figure_records(db, list(frame["run_id"])))
    fig = explore_scatter(frame, "tpot_ms_p50", "ttft_ms_p50", fronts=fronts)
    [trace] = [t for t in fig.data if "predicted" in str(t.name)]
    assert trace.marker.symbol == "diamond-open" and trace.error_x.array is None
    assert [row[0] for row in trace.customdata] == [predicted] and "predicted on test CPU" in trace.text[0]
    assert "predicted, not measured" in trace.hovertemplate
    front = [t for t in fig.data if str(t.name).startswith("Pareto front")]
    assert [row[0] for t in front for row in t.customdata] == [measured]


def test_the_explore_report_and_csv_mark_predicted_runs(runs):
    db, _, _, predicted = runs
    frame = _frame(db)
    text = explore_html(frame, "tpot_ms_p50", "ttft_ms_p50")
    assert "2 measured runs with both figures" in text and "1 predicted run drawn apart" in text
    assert "Predicted runs (1): not measured" in text and "calibrated from 3 runs" in text
    csv = pd.read_csv(pd.io.common.StringIO(table_csv(frame)))
    row = csv[csv["run_id"] == predicted].iloc[0]
    assert (
        bool(row["predicted"]) and row["band"].startswith("band (leave-one-out") and "calibrated" in row["prediction"]
    )
    assert not csv[csv["run_id"] != predicted]["predicted"].any()


def test_the_comparison_exports_say_predicted(runs):
    db, measured, _, predicted = runs
    both = [get_run(db, measured), get_run(db, predicted)]
    requests = load_requests(db, [measured, predicted])
    page = comparison_html(both, requests, measured)
    assert f"runs {measured}, {predicted} (run {predicted} predicted, not measured)" in page
    assert "Prediction against measurement" in page and "its measured twin (the same spec)" in page
    assert "PREDICTED: calibrated from 3 runs" in page and "predicted on test CPU (local, measured)" in page
    csv = pd.read_csv(pd.io.common.StringIO(comparison_csv(both, measured, requests)))
    assert csv[f"#{predicted} predicted"].all() and csv[f"#{predicted} band ±%"].notna().any()
    assert csv[f"#{predicted} prediction"].str.startswith("calibrated").all()
    objs = {o["run_id"]: o for o in json.loads(runs_json(both, requests))}
    assert objs[predicted]["predicted"] is True and objs[predicted]["band"]["n_runs"] == 3
    assert objs[predicted]["prediction"]["label"].startswith("calibrated")
    assert (
        objs[predicted]["link"] == f"run?run={predicted}&predicted=1"
        and objs[measured]["link"] == f"run?run={measured}"
    )
    assert objs[measured]["predicted"] is False


def test_history_never_holds_a_predicted_run(runs):
    db, measured, slower, predicted = runs
    fingerprint = get_run(db, measured).fingerprint
    assert get_run(db, predicted).fingerprint == fingerprint  # the twin shares the spec's fingerprint
    assert [r.id for r in fingerprint_runs(db, fingerprint)] == [measured, slower]
    assert [p.run_id for p in history(db, fingerprint, "tpot_ms_p50").points] == [measured, slower]
    handed = build_history(fingerprint, "tpot_ms_p50", get_runs(db, [measured, slower, predicted]))
    assert [p.run_id for p in handed.points] == [measured, slower] and handed.skipped == 0
