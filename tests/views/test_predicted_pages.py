"""Predicted runs on the pages (AppTest): Runs lists them only when asked, with the PREDICTED badge; the Run page
says "Predicted, not measured" with the calibration, band, hardware and TP and leaves nothing measured-only
misleading; Compare checks a prediction against its measured twin figure by figure, without a verdict."""

from __future__ import annotations

import json

import pytest
from seed_runs import AZURE_TRACE, make_predicted_run, make_run, open_page

TWIN = {"name": "azure window", "workload": AZURE_TRACE, "n": 40}


@pytest.fixture
def twins(db, db_url, monkeypatch):
    """A measured Azure-trace run and its prediction (same spec), and a predicted run on two H100s."""
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    measured = make_run(db, ttft_ms=60, tpot_ms=20, **TWIN)
    predicted = make_predicted_run(db, ttft_ms=61.2, tpot_ms=23, **TWIN)
    gpu = make_predicted_run(db, hardware="h100-sxm", hardware_name="NVIDIA H100 SXM", tp=2, band=None, tpot_ms=4)
    return measured, predicted, gpu


def _texts(at) -> str:
    parts = [m.value for m in at.markdown] + [w.value for w in at.warning] + [c.value for c in at.caption]
    parts += [s.value for s in at.subheader] + [t.value for t in at.title] + [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


def _ids(frame) -> list[int]:
    return [int(v) for v in frame["link"].str.extract(r"run=(\d+)")[0]]


def test_runs_lists_measured_runs_unless_asked(twins):
    measured, predicted, gpu = twins
    at = open_page("views/runs.py")
    assert not at.exception
    frame = at.dataframe[0].value
    assert _ids(frame) == [measured] and "predicted" not in frame.columns
    at = open_page("views/runs.py", predicted="1")
    frame = at.dataframe[0].value
    assert _ids(frame) == [gpu, predicted] and set(frame["predicted"]) == {"PREDICTED"}
    assert list(frame["link"]) == [f"run?run={gpu}&predicted=1", f"run?run={predicted}&predicted=1"]
    config = json.loads(at.dataframe[0].proto.columns)
    assert sum(c.get("width", 0) for c in config.values()) <= 945  # the badge fits without a horizontal scroll
    at = open_page("views/runs.py", predicted="all")
    frame = at.dataframe[0].value
    assert _ids(frame) == [gpu, predicted, measured] and list(frame["predicted"]) == ["PREDICTED", "PREDICTED", ""]
    at = open_page("views/runs.py", predicted="yes")
    assert "Ignoring predicted=" in _texts(at) and _ids(at.dataframe[0].value) == [measured]


def test_the_run_page_says_predicted_not_measured(twins):
    _, predicted, gpu = twins
    at = open_page("views/run.py", run=str(predicted))
    assert not at.exception
    text = _texts(at)
    assert [t.value for t in at.title] == ["Predicted run"]
    assert at.subheader[0].value.endswith("predicted on test CPU (local, measured)")
    assert "**Predicted, not measured**" in text and "calibrated from 3 runs" in text
    assert "band (leave-one-out median error): TPOT p50 ±10 %" in text and "tensor parallel 1" in text
    for section in ("Client", "Diagnostics: telemetry and energy", "Server metrics", "Accuracy"):
        assert f"**{section}**: not predicted" in text
    cards = {m.label: m.value for m in at.metric}
    assert cards["Peak memory"] == cards["Weights memory"] == cards["Load time"] == "not predicted"
    assert "Energy per output token" not in text
    at = open_page("views/run.py", run=str(gpu), predicted="1")
    text = _texts(at)
    assert "no band claimed" in text and "NVIDIA H100 SXM (h100-sxm) · tensor parallel 2" in text


def test_a_measured_run_page_is_unchanged(twins):
    measured, _, _ = twins
    at = open_page("views/run.py", run=str(measured))
    assert [t.value for t in at.title] == ["Run"] and "Predicted, not measured" not in _texts(at)


def test_compare_checks_the_prediction_against_its_twin(twins):
    measured, predicted, _ = twins
    at = open_page("views/compare.py", runs=f"{predicted},{measured}")
    assert not at.exception
    text = _texts(at)
    assert at.query_params["baseline"] == str(measured)  # the measured twin is the default baseline
    assert "Prediction against measurement" in text
    assert f"run {predicted} (predicted) against run {measured}, its measured twin (the same spec)" in text
    assert "figures within the band" in text
    check = next(d.value for d in at.dataframe if "within the band" in d.value.columns)
    assert list(check.columns)[1:3] == [f"measured (run {measured})", f"predicted (run {predicted})"]
    assert "predicted vs measured" in text and "predicted, not measured: measure it before deciding" in text
    assert "significant," not in text
    side = next(d.value for d in at.dataframe if "metric" in d.value.columns)
    assert set(side[f"#{predicted} verdict"]) == {"a prediction: no significance test", "–"}
    assert f"run?run={predicted}&predicted=1" in text  # the recipes' links carry it
    assert not [b for b in at.button if "Queue repeats" in str(b.label)]  # nothing to repeat: a prediction


def _explore_traces(at) -> dict[str, list[int]]:
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    out: dict[str, list[int]] = {}
    for trace in fig["data"]:
        data = trace.get("customdata")
        if isinstance(data, list):
            out.setdefault(str(trace.get("name")), []).extend(int(row[0]) for row in data)
    return out


def test_explore_draws_predicted_runs_only_when_asked_and_never_on_a_front(twins):
    measured, predicted, gpu = twins
    at = open_page("views/explore.py", x="tpot_ms_p50", y="output_tokens_per_s")
    assert not at.exception
    traces = _explore_traces(at)
    assert predicted not in {i for ids in traces.values() for i in ids} and "predicted" not in at.query_params
    at = open_page("views/explore.py", x="tpot_ms_p50", y="output_tokens_per_s", predicted="1")
    assert not at.exception
    traces = _explore_traces(at)
    assert sorted(traces["predicted (not measured, never on a front)"]) == [predicted, gpu]
    fronts = [i for name, ids in traces.items() if name.startswith("Pareto front") for i in ids]
    assert fronts == [measured]  # the faster predicted H100 run does not push the measured run off the front
    assert "Hollow diamonds: 2 predicted runs" in _texts(at) and "Pareto front: 1 run" in _texts(at)
    assert at.checkbox(key="explore_predicted").value is True
