"""A run's side records (telemetry, server metrics, profiles): written with the run, read back by kind."""

from __future__ import annotations

from storage.runs import NewRun, delete_run, save_run
from storage.series import get_series, series_kinds


def _run(**series) -> NewRun:
    return NewRun(
        status="done", spec={}, fingerprint="f", model="demo", engine="transformers", device="cpu", series=series
    )


def test_series_round_trip_by_kind(db):
    run_id = save_run(db, _run(telemetry={"t_s": [0.0, 0.1], "cpu_pct": [50.0, 60.0]}, profile={"ops": []}))
    assert series_kinds(db, run_id) == ["profile", "telemetry"]
    assert get_series(db, run_id, "telemetry") == {"t_s": [0.0, 0.1], "cpu_pct": [50.0, 60.0]}
    assert get_series(db, run_id, "server_metrics") is None


def test_deleting_a_run_deletes_its_series(db):
    run_id = save_run(db, _run(telemetry={"t_s": []}))
    assert delete_run(db, run_id)
    assert series_kinds(db, run_id) == []
