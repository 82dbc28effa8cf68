"""Headline columns of runs: filled on save, back-filled by the migration, and read by SQL-paged frames."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from seed_runs import make_run, real_quality, spec_dict
from sqlalchemy import create_engine, text

from engine.measure import registry
from storage import open_database
from storage.frames import RunQuery, count, distinct_values, query_frame, runs_page
from storage.models import Base
from storage.version_table import VERSION_TABLE

MIGRATIONS = Path(__file__).resolve().parents[2] / "storage" / "migrations"


def _columns(db, run_id: int) -> dict:
    with db.engine.connect() as conn:
        return dict(conn.execute(text("SELECT * FROM runs WHERE id = :i"), {"i": run_id}).mappings().one())


def test_save_fills_the_headline_columns(db):
    flag = {"flag": "contention", "kind": "machine", "detail": "load 3.4 on 2 cores"}
    run_id = make_run(
        db,
        dtype="bfloat16",
        batch_size=4,
        quality=real_quality(perplexity=17.0, tasks={"arc": (0.5, "multiple choice")}),
        failed_requests=2,
        extra_metrics={"noise_flags": [flag]},
    )
    row = _columns(db, run_id)
    metrics = json.loads(row["metrics_json"])
    assert row["ttft_ms_p50"] == metrics["ttft_ms"]["p50"] and row["tpot_ms_p99"] == metrics["tpot_ms"]["p99"]
    assert row["output_tokens_per_s"] == metrics["output_tokens_per_s"]
    assert row["quality_perplexity"] == 17.0 and row["peak_memory_bytes"] == 500 * 2**20
    assert row["error_rate"] == pytest.approx(2 / 6) and (row["completed"], row["failed"]) == (4, 2)
    assert row["noise"] == "load 3.4 on 2 cores" and row["contended"]
    assert json.loads(row["knobs_json"])["recipe"] == {"dtype": "bfloat16"}
    assert json.loads(row["tasks_json"]) == {"quality.task:arc": 0.5, "quality.task:arc:kind": "multiple choice"}
    # every stored metric of the registry is a column, and nothing else is
    assert {m.column for m in registry.stored_metrics()} <= set(row)
    assert "queue_ms_p50" not in row


def test_models_match_the_migrated_schema(db):
    with db.engine.connect() as conn:
        migrated = {c[1] for c in conn.execute(text("PRAGMA table_info(runs)"))}
    missing = sorted(m.key for m in registry.stored_metrics() if m.column not in migrated)
    assert not missing, (
        f"{missing}: declared with their own SQL column (shown holds 'column') but no Alembic revision adds it; "
        "add one under storage/migrations/versions/ (as 0007_scale.py does), or declare it without a column "
        "(engine.measure.declarations.SHOWN: Explore then reads it from the metrics JSON)"
    )
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), Base.metadata)
    assert diff == []


def _insert_old_run(conn, run_id: int, spec: dict, metrics: dict | None, quality: dict | None, status="done") -> None:
    conn.execute(
        text(
            "INSERT INTO runs (id, created_at, status, fingerprint, spec_json, model, engine, device, "
            "provenance_json, metrics_json, quality_json) VALUES (:id, '2026-01-01 00:00:00', :status, 'f', :spec, "
            "'demo', 'transformers', 'cpu', '{}', :m, :q)"
        ),
        {
            "id": run_id,
            "status": status,
            "spec": json.dumps(spec),
            "m": None if metrics is None else json.dumps(metrics),
            "q": None if quality is None else json.dumps(quality),
        },
    )


def test_migration_back_fills_runs_stored_at_the_previous_head(tmp_path, db):
    # metrics as a real run stores them, taken from a run saved in the current schema
    source = make_run(db, quality=real_quality(perplexity=20.0))
    real = json.loads(_columns(db, source)["metrics_json"])
    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0006_run_series")
        for i in range(1, 2502):  # more than one back-fill batch
            _insert_old_run(conn, i, spec_dict(dtype="bfloat16" if i % 2 else "float32"), real, None)
        _insert_old_run(conn, 2502, spec_dict(), real, real_quality(perplexity=20.0))
        _insert_old_run(conn, 2503, spec_dict(), None, None, status="failed")
        _insert_old_run(conn, 2504, spec_dict(), None, None)
        conn.execute(text("UPDATE runs SET metrics_json = '{broken' WHERE id = 2504"))
    engine.dispose()
    new = open_database(url)  # migrates to head and back-fills
    first, quality_run, failed, broken = (_columns(new, i) for i in (1, 2502, 2503, 2504))
    assert first["ttft_ms_p50"] == real["ttft_ms"]["p50"] and first["output_tokens_per_s"] > 0
    assert json.loads(first["knobs_json"])["recipe"] == {"dtype": "bfloat16"}
    assert _columns(new, 2501)["tpot_ms_p50"] == real["tpot_ms"]["p50"]  # the second batch too
    assert quality_run["quality_perplexity"] == 20.0
    assert failed["ttft_ms_p50"] is None and failed["knobs_json"] is not None
    assert broken["ttft_ms_p50"] is None and broken["knobs_json"] is None  # unreadable JSON: columns stay empty
    frame = query_frame(new, RunQuery(sort="quality.perplexity", limit=3))
    assert frame["run_id"].iloc[0] == 2502 and frame["recipe.dtype"].iloc[1] in ("bfloat16", "float32")


@pytest.fixture
def several(db):
    ids = {
        "slow": make_run(db, name="slow", tpot_ms=30.0, dtype="float32"),
        "fast": make_run(db, name="fast", tpot_ms=5.0, dtype="bfloat16", seed=1),
        "mid": make_run(db, name="mid", tpot_ms=15.0, model="synthetic:smollm2-135m", seed=2),
        "broken": make_run(db, name="broken", status="failed", error="out of memory while loading"),
    }
    return db, ids


def test_sql_sort_filter_and_page(several):
    db, ids = several
    by_tpot = query_frame(db, RunQuery(sort="tpot_ms_p50", descending=False))
    assert by_tpot["run_id"].tolist() == [ids["fast"], ids["mid"], ids["slow"], ids["broken"]]  # no value: last
    page, total = runs_page(db, RunQuery(sort="tpot_ms_p50", descending=False, limit=2, offset=1))
    assert total == 4 and page["run_id"].tolist() == [ids["mid"], ids["slow"]]
    assert page["knobs"].iloc[1]["recipe"] == {"dtype": "float32"}
    assert count(db, RunQuery(model=("synthetic:smollm2-135m",))) == 1
    assert query_frame(db, RunQuery(status=("failed",)))["run_id"].tolist() == [ids["broken"]]
    assert query_frame(db, RunQuery(text="BFLOAT16"))["run_id"].tolist() == [ids["fast"]]
    assert query_frame(db, RunQuery(text="memory"))["run_id"].tolist() == [ids["broken"]]
    assert query_frame(db, RunQuery(run_ids=(ids["slow"], ids["mid"])))["run_id"].tolist() == [ids["mid"], ids["slow"]]
    assert count(db, RunQuery(since=date(2999, 1, 1))) == 0 and count(db, RunQuery(until=date(2999, 1, 1))) == 4
    assert distinct_values(db, "model") == ["demo", "synthetic:smollm2-135m"]
    assert distinct_values(db, "status") == ["done", "failed"]


def test_frame_has_every_knob_and_the_metric_keys(several):
    db, ids = several
    frame = query_frame(db).set_index("run_id")
    assert frame.at[ids["fast"], "recipe.dtype"] == "bfloat16"
    assert frame.at[ids["slow"], "recipe.attn_implementation"] == "auto"  # a default is filled in
    assert frame.at[ids["slow"], "workload.batch_size"] == 1 and frame.at[ids["slow"], "workload.arrival"] == "batch"
    assert frame.at[ids["fast"], "tpot_ms_p50"] < frame.at[ids["slow"], "tpot_ms_p50"]
    assert "quality.perplexity" in frame.columns and "knobs" not in frame.columns
