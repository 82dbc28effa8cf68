"""Launch's traffic choice and preview (AppTest): only the chosen source's fields, the traffic previewed
before Submit, and a bad file in one line with Submit disabled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from storage import jobs

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PRESET = "chat: 128 in / 128 out"


@pytest.fixture
def app(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.switch_page("views/launch.py")
    at.run()
    assert not at.exception
    return at


def _labels(at: AppTest) -> set[str]:
    return {w.label for kind in ("selectbox", "number_input", "checkbox", "text_input") for w in at.get(kind)}


def _trace(tmp_path: Path, rows: int = 20) -> str:
    lines = [
        {"timestamp": i * 500, "input_length": 600 + 10 * i, "output_length": 8, "hash_ids": [1, 100 + i]}
        for i in range(rows)
    ]
    path = tmp_path / "mooncake.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    return str(path)


def test_each_traffic_choice_shows_only_its_fields(app):
    assert "Trace file (its own schedule)" not in _labels(app)
    app.radio(key="traffic").set_value("trace").run()
    labels = _labels(app)
    assert {"Trace file (its own schedule)", "Trace format", "Trace speed-up (x)"} <= labels
    assert not {"Prompt tokens", "Arrival", "Dataset (file, folder or hf:ID[:SPLIT])"} & labels
    app.radio(key="traffic").set_value("sessions").run()
    labels = _labels(app)
    assert {"Dataset (file, folder or hf:ID[:SPLIT])", "Think time between turns (s, mean)"} <= labels
    assert not {"Trace file (its own schedule)", "Multi-turn sessions (real replies carried)"} & labels
    app.radio(key="traffic").set_value("prefixes").run()
    assert {"Shared prefixes (how many)", "Shared prefix length (tokens)", "Prompt tokens"} <= _labels(app)


def test_a_trace_is_previewed_before_submit_and_queued_as_shown(app, db, tmp_path):
    app.radio(key="traffic").set_value("trace").run()
    app.text_input(key=f"tr_{PRESET}_trace_trace").input(_trace(tmp_path)).run()
    app.number_input(key=f"tr_{PRESET}_trace_time_scale").set_value(2.0).run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    expander = next(e for e in app.expander if e.label.startswith("Preview traffic"))
    assert "mooncake.jsonl (mooncake), 2x faster" in expander.label
    text = " ".join(m.value for m in expander.markdown)
    # the preset's 8 requests cap the trace's rows: rows 0..7, the last due at 3.5 s / 2
    assert "8 requests" in text and "duration: 1.8 s" in text and "shared-prefix share" in text
    assert len(expander.get("plotly_chart")) == 3  # rate over time, prompt and output lengths
    app.button(key="submit").click().run()
    (job,) = jobs.list_jobs(db)
    traffic = job.spec["workload"]["traffic"]
    assert traffic["source"] == "trace" and traffic["trace"].endswith("mooncake.jsonl") and traffic["time_scale"] == 2.0
    assert "prompt_tokens" not in traffic


def test_a_bad_trace_is_one_line_and_disables_submit(app, db, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n{"timestamp": "soon"}\n')
    app.radio(key="traffic").set_value("trace").run()
    app.text_input(key=f"tr_{PRESET}_trace_trace").input(str(bad)).run()
    assert not app.exception
    errors = [e.value for e in app.error]
    assert len(errors) == 1 and "bad.jsonl line 2" in errors[0] and "\n" not in errors[0], errors
    assert app.button(key="submit").disabled
    assert not any(e.label.startswith("Preview traffic") for e in app.expander)
    assert jobs.list_jobs(db) == []
