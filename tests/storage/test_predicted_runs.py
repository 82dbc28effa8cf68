"""Predicted runs (the serving simulator's): revision 0011 adds ``runs.predicted`` to a database made by
0010 (every run back-filled false, no request lost, plain Optuna still opens it), a predicted run round-trips,
and every listing stays measured unless it asks."""

from __future__ import annotations

import optuna
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

from engine.measure.records import RequestRecord
from engine.report.results import result_object
from storage import open_database
from storage.db import MIGRATIONS
from storage.frames import RunQuery, count, distinct_values, query_frame
from storage.runs import NewRun, get_requests, get_run, get_runs, list_runs, save_run
from storage.suites import fingerprint_run_ids, fingerprints, newest_runs
from storage.version_table import VERSION_TABLE, heads

PREDICTION = {
    "hardware": "h100-sxm",
    "hardware_name": "NVIDIA H100 SXM",
    "tp": 2,
    "label": "calibrated from 3 runs on Intel CPU (local, measured), carried to NVIDIA H100 SXM by roofline",
    "band": {"ttft_p50_pct": 8.0, "tpot_p50_pct": 3.0, "n_runs": 3},
}


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _database_at_0010(url: str) -> None:
    """A database as revision 0010 left it: one run with a request, and Optuna's tables beside ours."""
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = _config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0010_traffic")
        conn.execute(
            text(
                "INSERT INTO runs (id, created_at, status, fingerprint, spec_json, model, engine, device, "
                "provenance_json) VALUES (1, '2026-12-04 00:00:00', 'done', 'f', '{}', 'demo', 'transformers', "
                "'cpu', '{}')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO requests (run_id, idx, warmup, arrival_ns, send_ns, prompt_tokens, output_tokens, "
                "chunk_ns_json, chunk_tokens_json, cancelled) VALUES (1, 0, 0, 1, 2, 3, 1, '[10]', '[1]', 0)"
            )
        )
    engine.dispose()
    optuna.storages.RDBStorage(url).engine.dispose()  # Optuna's tables, stamped in its alembic_version


def test_a_database_made_by_0010_migrates_and_plain_optuna_still_opens_it(db_url):
    _database_at_0010(db_url)
    db = open_database(db_url)
    [run] = list_runs(db)
    assert run.id == 1 and run.predicted is False
    [req] = get_requests(db, 1)  # the column was added in place: no request went with a copied table
    assert req.chunk_ns == [10]
    with db.engine.connect() as conn:
        assert heads(conn, VERSION_TABLE) == ["0011_predicted"]
        assert conn.execute(text("SELECT COUNT(*) FROM runs WHERE predicted = 0")).scalar() == 1
    storage = optuna.storages.RDBStorage(db_url)  # its schema check passes: alembic_version is still Optuna's
    assert storage.get_current_version() == storage.get_head_version()
    storage.engine.dispose()


def test_the_revision_goes_down_without_losing_requests(db_url):
    db = open_database(db_url)
    run_id = save_run(db, _run(predicted=False))
    db.engine.dispose()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        cfg = _config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0010_traffic")
        assert conn.execute(text("SELECT COUNT(*) FROM requests WHERE run_id = :r"), {"r": run_id}).scalar() == 2
        assert "predicted" not in {c["name"] for c in inspect(conn).get_columns("runs")}
    engine.dispose()


def _run(predicted: bool, fingerprint: str = "fp1") -> NewRun:
    records = [
        RequestRecord(
            index=i, arrival_ns=0, send_ns=0, prompt_tokens=16, chunk_ns=[1_000_000 * (k + 1) for k in range(4)]
        )
        for i in range(2)
    ]
    for r in records:
        r.chunk_tokens = [1, 1, 1, 1]
    return NewRun(
        status="done",
        spec={"model": {"source": "demo"}},
        fingerprint=fingerprint,
        model="demo",
        engine="vllm-server",
        device="h100-sxm" if predicted else "cpu",
        device_name="2 x NVIDIA H100 SXM" if predicted else "Intel CPU",
        metrics={"ttft_ms": {"p50": 1.0}, "tpot_ms": {"p50": 1.0}, "output_tokens_per_s": 100.0},
        provenance={"prediction": PREDICTION} if predicted else {},
        requests=records,
        predicted=predicted,
    )


@pytest.fixture
def both(db):
    """A measured run and a predicted run of the same fingerprint."""
    measured = save_run(db, _run(predicted=False))
    predicted = save_run(db, _run(predicted=True))
    return db, measured, predicted


def test_a_predicted_run_round_trips_with_its_prediction(both):
    db, _, predicted = both
    run = get_run(db, predicted)
    assert run.predicted is True and run.provenance["prediction"] == PREDICTION
    assert len(get_requests(db, predicted)) == 2
    obj = result_object(run)
    assert obj["predicted"] is True and obj["band"] == PREDICTION["band"] and obj["prediction"]["tp"] == 2
    assert result_object(get_run(db, both[1]))["predicted"] is False


def test_a_predicted_run_without_its_prediction_is_refused(db):
    run = _run(predicted=True)
    run.provenance = {}
    with pytest.raises(ValueError, match="names its prediction"):
        save_run(db, run)
    assert list_runs(db, predicted=None) == []


def test_listings_are_measured_unless_they_ask(both):
    db, measured, predicted = both
    assert [r.id for r in list_runs(db)] == [measured]
    assert [r.id for r in list_runs(db, predicted=True)] == [predicted]
    assert [r.id for r in list_runs(db, predicted=None)] == [predicted, measured]
    assert list(query_frame(db)["run_id"]) == [measured]  # Explore's fronts, the Runs table
    assert sorted(query_frame(db, RunQuery(predicted=None))["run_id"]) == [measured, predicted]
    assert count(db) == 1 and count(db, RunQuery(predicted=True)) == 1
    assert distinct_values(db, "device") == ["cpu"]
    assert distinct_values(db, "device", predicted=True) != ["cpu"] and distinct_values(db, "device", predicted=None)
    assert set(distinct_values(db, "device", predicted=None)) == {"cpu", *distinct_values(db, "device", predicted=True)}
    assert fingerprint_run_ids(db, "fp1") == [measured]  # History
    assert newest_runs(db, ["fp1"]) == {"fp1": measured}  # gates and suites
    assert [f.runs for f in fingerprints(db)] == [1]
    assert [r.id for r in get_runs(db, [measured, predicted])] == [measured, predicted]  # by id: either
