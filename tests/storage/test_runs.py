"""The runs façade: atomic writes, raw stamps round-trip, SQLite settings."""

from __future__ import annotations

from sqlalchemy import inspect, text

from engine.measure.records import RequestRecord
from storage.runs import NewRun, count_runs, delete_run, get_requests, get_run, list_runs, save_run


def new_run(**over) -> NewRun:
    data = dict(
        status="done",
        spec={"model": {"source": "demo"}},
        fingerprint="abc",
        model="demo",
        engine="transformers",
        device="cpu",
        metrics={"ttft_ms": {"p50": 1.0}},
        provenance={"host": "h"},
        requests=[
            RequestRecord(index=0, arrival_ns=1, send_ns=2, prompt_tokens=3, chunk_ns=[10, 20], chunk_tokens=[1, 2])
        ],
    )
    data.update(over)
    return NewRun(**data)


def test_schema_and_sqlite_pragmas(db):
    tables = set(inspect(db.engine).get_table_names())
    assert {"runs", "requests", "jobs", "workers", "latencylab_alembic_version"} <= tables
    with db.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000


def test_round_trip_keeps_raw_stamps(db):
    run_id = save_run(db, new_run())
    run = get_run(db, run_id)
    assert run is not None and run.status == "done" and run.provenance == {"host": "h"}
    assert run.metrics == {"ttft_ms": {"p50": 1.0}}
    [r] = get_requests(db, run_id)
    assert (r.send_ns, r.chunk_ns, r.chunk_tokens, r.output_tokens) == (2, [10, 20], [1, 2], 3)
    assert count_runs(db) == 1
    assert [s.id for s in list_runs(db)] == [run_id]


def test_large_perf_counter_values_fit(db):
    big = 2**62
    run_id = save_run(db, new_run(requests=[RequestRecord(0, big, big + 1, 1, [big + 2], [1])]))
    assert get_requests(db, run_id)[0].chunk_ns == [big + 2]


def test_failed_run_has_reason_and_no_requests(db):
    run_id = save_run(db, new_run(status="failed", metrics=None, error="boom", requests=[]))
    run = get_run(db, run_id)
    assert run.status == "failed" and run.error == "boom" and run.metrics is None
    assert get_requests(db, run_id) == []


def test_missing_run_and_delete(db):
    assert get_run(db, 12345) is None
    run_id = save_run(db, new_run())
    assert delete_run(db, run_id)
    assert get_run(db, run_id) is None and get_requests(db, run_id) == []


def test_failed_write_leaves_nothing(db):
    bad = new_run(requests=[RequestRecord(0, 1, 2, 3, [object()], [1])])  # not JSON-serialisable
    try:
        save_run(db, bad)
    except TypeError:
        pass
    assert count_runs(db) == 0


def test_each_request_keeps_its_trial(db):
    reqs = [
        RequestRecord(index=i, arrival_ns=1, send_ns=2, prompt_tokens=3, chunk_ns=[10], chunk_tokens=[1], trial=i // 2)
        for i in range(4)
    ]
    run_id = save_run(db, new_run(requests=reqs))
    assert [r.trial for r in get_requests(db, run_id)] == [0, 0, 1, 1]


def test_requests_stored_before_trials_read_as_trial_0(tmp_path):
    """A database at revision 0002 with a request row, upgraded: the row reads as trial 0."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from storage import open_database
    from storage.db import MIGRATIONS

    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002_hardware")
        conn.execute(
            text(
                "INSERT INTO runs (id, created_at, status, fingerprint, spec_json, model, engine, device, "
                "provenance_json) VALUES (1, '2026-01-01 00:00:00', 'done', 'f', '{}', 'demo', 'transformers', "
                "'cpu', '{}')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO requests (run_id, idx, warmup, arrival_ns, send_ns, prompt_tokens, output_tokens, "
                "chunk_ns_json, chunk_tokens_json) VALUES (1, 0, 0, 1, 2, 3, 1, '[10]', '[1]')"
            )
        )
    engine.dispose()
    db = open_database(url)  # migrates to head
    [req] = get_requests(db, 1)
    assert req.trial == 0 and req.chunk_ns == [10]
