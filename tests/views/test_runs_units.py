"""The Runs table's units and dates (issue 34, item 9): TTFT/TPOT headers carry ms, dates read 2026-12-03 14:05."""

from __future__ import annotations

import json

from seed_runs import make_run, open_page


def test_latency_columns_say_ms_and_dates_are_iso(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    make_run(db)
    at = open_page("views/runs.py")
    assert not at.exception
    config = json.loads(at.dataframe[0].proto.columns)
    assert config["ttft_ms_p50"]["label"] == "TTFT [ms]" and config["tpot_ms_p50"]["label"] == "TPOT [ms]"
    assert config["created_at"]["type_config"]["format"] == "YYYY-MM-DD HH:mm"
    assert sum(c.get("width", 0) for c in config.values()) <= 945  # still no horizontal scroll at 1440 px
