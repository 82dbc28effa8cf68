"""What-if's serving mode (AppTest): a capacity plan's question is a link; Run sizes every configuration with
progress and shows the answer, table and charts, all predicted; Run is disabled with the reason while the
question cannot be planned; nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from storage.runs import list_runs

APP = Path(__file__).resolve().parents[2] / "app.py"
SMALL = {
    "mode": "serving",
    "sample": "150",
    "hw": "h100-sxm,l40s",
    "rate": "30",
    "variants": "base;fp8:kv_cache_dtype=fp8",
}


@pytest.fixture
def app_db(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    return db


def open_serving(**params: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page("views/whatif.py")
    return at.run()


def run_button(at: AppTest):
    return next(b for b in at.button if b.label == "Run the capacity search")


def test_the_question_is_a_link_and_run_answers_it_with_predicted_figures(app_db):
    at = open_serving(**SMALL, tpot="40", traffic='{"prompt_tokens":256}')
    assert not at.exception and not at.warning
    assert at.query_params["mode"] == "serving" and at.query_params["variants"] == SMALL["variants"]
    assert json.loads(at.query_params["traffic"]) == {"prompt_tokens": 256}
    assert not run_button(at).disabled and not at.dataframe  # nothing computed before Run
    at = run_button(at).click().run(timeout=180)
    assert not at.exception
    assert any(s.value.startswith("Cheapest within TTFT p90 ≤ 500 ms and TPOT p90 ≤ 40 ms") for s in at.success)
    frame = at.dataframe[0].value
    assert list(frame["configuration"]) == [
        "base · h100-sxm · TP1", "base · l40s · TP1", "fp8 · h100-sxm · TP1", "fp8 · l40s · TP1"
    ]  # fmt: skip
    assert set(frame["calibration"]) == {"uncalibrated, no band"}
    assert all(v.startswith("$") for v in frame["$ per 1M out tokens"])
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert [c["layout"]["title"]["text"] for c in charts] == [
        "Replicas for the peak against the SLO (predicted)", "Cost against latency (predicted)"
    ]  # fmt: skip
    slo_lines = charts[0]["data"]
    assert len(slo_lines) == 4 and all(t["name"].endswith("(predicted)") for t in slo_lines)
    assert slo_lines[0]["x"] == [250.0, 375.0, 500.0, 750.0, 1000.0, 1500.0]  # TTFT limits, scaled
    assert any("front" in t["name"] for t in charts[1]["data"])
    assert any("no error band is claimed" in i.value for i in at.info)
    assert list_runs(app_db, predicted=None) == []  # nothing stored
    at.radio(key="cap_y").set_value("cost").run()  # the chart's axis is part of the link; the answer is kept
    assert at.query_params["y"] == "cost" and at.dataframe
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["yaxis"]["title"]["text"] == (
        "$ per 1M output tokens"
    )


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"ttft": "", "tpot": ""}, "give an SLO"),
        ({"ttft": "fast"}, "TTFT 'fast' is not a number"),
        ({"variants": "fp8:kv"}, "is not KNOB=VALUE"),
        ({"price": "l40s=free"}, "is not HARDWARE=USD"),
        ({"model": "synthetic:llama-3-70b", "hw": "l40s"}, "no configuration can hold this traffic"),
        ({"rate": "lots"}, "the peak rate, output tokens and requests per probe must be numbers"),
    ],
)
def test_run_is_disabled_with_the_reason(app_db, params, needle):
    at = open_serving(**{**SMALL, **params})
    assert not at.exception
    assert run_button(at).disabled
    assert any(needle in c.value for c in at.caption), [c.value for c in at.caption]


def test_a_configuration_that_does_not_fit_is_left_out_in_one_line(app_db):
    at = open_serving(**{**SMALL, "model": "synthetic:llama-3-70b", "hw": "l40s,h200", "tp": "1,2"})
    assert not at.exception and not run_button(at).disabled
    lines = [w.value for w in at.warning]
    assert any("Left out: base · l40s · TP1: weights of 141.1 GB per device do not fit" in w for w in lines)
    assert not any("h200 · TP2" in w for w in lines)


def test_bad_link_values_are_said_and_the_modes_switch(app_db):
    at = open_serving(mode="serving", hw="b200,l4", engine="tensorrt")
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    assert "unknown hardware 'b200' left out" in said and "engine 'tensorrt' is not one of the choices" in said
    assert at.query_params["hw"] == "l4"
    at.segmented_control(key="wi_mode").set_value("estimate").run()
    assert not at.exception and "mode" not in at.query_params and at.dataframe  # the estimate's table
