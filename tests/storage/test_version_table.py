"""LatencyLab's own Alembic version table: a database made by the old main is carried over on its
first open (every row kept, Optuna's ``alembic_version`` left as Optuna expects it), concurrent
first opens carry it once, and plain Optuna, ``optuna storage upgrade`` and the project all open
a project database, on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from sqlalchemy import create_engine, inspect, text

import storage.db as storage_db
from engine.optimize import sampling
from engine.optimize.driver import advance
from engine.optimize.study import StudyDefinition, parse_definition
from storage import StorageError, jobs, studies
from storage.db import MIGRATIONS, Database
from storage.runs import NewRun, get_requests, get_run, list_runs, save_run
from storage.version_table import SHARED_TABLE, VERSION_TABLE, heads

REPO = Path(__file__).resolve().parents[2]
MAIN_0009 = Path(__file__).resolve().parent / "data" / "main_0009.db"
OPTUNA_CLI = Path(sys.executable).parent / "optuna"
_VERSION_TABLES = {SHARED_TABLE, VERSION_TABLE}


STUDY = {
    "name": "s1",
    "base": {"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "output_tokens": 8, "requests": 2}},
    "objectives": ["tpot_p50"],
    "constraints": {"max_ppl_increase_pct": 2.0},
    "budget": {"trials": 3},
    "knobs": ["dtype", "quantization"],
    "values": {"dtype": ["float32", "bfloat16"], "quantization": ["none", "torch_dynamic_int8"]},
}


def _definition() -> StudyDefinition:
    return parse_definition(STUDY)


def _measure(db: Database, job_id: int, tpot: float, worker: str = "w1") -> None:
    """Play the worker for a trial's job (the oldest queued one): claim it, store a done run, end it."""
    job = jobs.claim(db, worker, ["cpu"])
    assert job is not None and job.id == job_id
    jobs.mark_started(db, job_id, worker)
    metrics = {"tpot_ms": {"p50": tpot}, "ttft_ms": {"p50": 2 * tpot, "p99": 3 * tpot}}
    run = NewRun(
        status="done",
        spec=job.spec,
        fingerprint=job.fingerprint,
        model="demo",
        engine="transformers",
        device="cpu",
        metrics=metrics,
        quality={"perplexity": 20.0, "perplexity_tokens": 127},
        job_id=job_id,
        worker_id=worker,
    )
    save_run(db, run)
    jobs.finish(db, job_id, worker, "done")


def _our_heads() -> list[str]:
    from alembic.script import ScriptDirectory

    return sorted(ScriptDirectory(str(MIGRATIONS)).get_heads())


def _rows(url: str) -> dict[str, int]:
    """Rows per table, version tables left out."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            names = sorted(set(inspect(conn).get_table_names()) - _VERSION_TABLES)
            return {n: conn.execute(text(f'SELECT COUNT(*) FROM "{n}"')).scalar() for n in names}
    finally:
        engine.dispose()


def _versions(url: str) -> tuple[list[str], list[str] | None]:
    """(LatencyLab's revisions, Optuna's ``alembic_version`` rows or None when that table is gone)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            theirs = heads(conn, SHARED_TABLE) if SHARED_TABLE in inspect(conn).get_table_names() else None
            return sorted(heads(conn, VERSION_TABLE)), theirs
    finally:
        engine.dispose()


def _reopen(url: str, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The project opening ``url`` as a new process would: migrated again, Optuna opened afresh."""
    db = Database(url)
    db.migrate()
    monkeypatch.setattr(sampling, "_STORAGES", {})
    monkeypatch.setitem(storage_db._OPEN, url, db)
    return db


def _plain_optuna_accepts(url: str) -> optuna.storages.RDBStorage:
    """Plain Optuna, with its compatibility check, then ``optuna storage upgrade`` (exit 0)."""
    storage = optuna.storages.RDBStorage(url)
    assert storage.get_current_version() == storage.get_head_version()
    done = subprocess.run(
        [str(OPTUNA_CLI), "storage", "upgrade", "--storage", url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    storage.engine.dispose()
    return optuna.storages.RDBStorage(url)


@pytest.fixture
def old_copy(tmp_path: Path, session_dir: Path) -> str:
    """A copy of the database made by main at 4ee03bf (tests/storage/data/README.md)."""
    path = tmp_path / "main_0009.db"
    shutil.copyfile(MAIN_0009, path)
    return f"sqlite:///{path}"


def test_the_database_made_by_main_is_carried_over_with_every_row(old_copy, monkeypatch):
    before = _rows(old_copy)
    assert _versions(old_copy) == ([], ["0009_sla"])
    db = _reopen(old_copy, monkeypatch)
    ours, theirs = _versions(old_copy)
    assert ours == _our_heads()
    optuna_storage = _plain_optuna_accepts(old_copy)
    assert theirs == [optuna_storage.get_head_version()]
    assert _rows(old_copy) == before
    # read back through the façades and through plain Optuna
    runs = list_runs(db)
    assert len(runs) == 4 and {"fp32 baseline", "bf16", "sweep point"} <= {r.name for r in runs}
    assert sum(len(get_requests(db, r.id)) for r in runs) == 21
    assert [j.status for j in jobs.list_jobs(db)] == ["queued", "queued", "done"]
    _old_specs_read_into_the_typed_traffic(db, runs)
    [study] = studies.list_studies(db)
    [ostudy] = optuna_storage.get_all_studies()
    assert ostudy.study_name == study.optuna_name
    states = [t.state.name for t in optuna_storage.get_all_trials(ostudy._study_id)]
    assert states == ["COMPLETE", "RUNNING"]
    # the project drives the carried study on (Optuna opened with its check), and a second open changes nothing
    [_, trial1] = studies.list_trials(db, study.id)
    _measure(db, trial1.job_id, tpot=40.0, worker="w-main")
    assert advance(db, study.name).lines
    assert _versions(old_copy) == (ours, theirs)
    _reopen(old_copy, monkeypatch)
    assert _versions(old_copy) == (ours, theirs)


def _old_specs_read_into_the_typed_traffic(db, runs) -> None:
    """Specs stored with the flat workload of before Workload.traffic read into it, keep their fingerprints, and
    every page's words and links work on them (issue 31)."""
    from engine.report.naming import run_name
    from engine.report.recipes import workload_words
    from engine.spec import parse_job_spec

    for run in runs:
        detail = get_run(db, run.id)
        assert "traffic" not in detail.spec["workload"]  # stored flat, before the typed field
        spec = parse_job_spec(detail.spec)
        assert spec.fingerprint() == detail.fingerprint and spec.workload.traffic.source == "synthetic"
        assert run_name(detail) and "prompts" in workload_words(detail.spec["workload"])
    for job in jobs.list_jobs(db):
        assert parse_job_spec(job.spec).workload.traffic.source == "synthetic"


def test_a_study_made_through_the_project_opens_in_plain_optuna_and_upgrades(db_url, monkeypatch):
    _a_study_round_trip(db_url, monkeypatch)


def _a_study_round_trip(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _reopen(url, monkeypatch)
    d = _definition()
    study = studies.create_study(db, d.name, d.model_dump(mode="json"), submitted_by="test")
    advance(db, study.name)
    [trial0] = studies.list_trials(db, study.id)
    _measure(db, trial0.job_id, tpot=50.0)
    advance(db, study.name)
    storage = _plain_optuna_accepts(url)
    [ostudy] = storage.get_all_studies()
    assert ostudy.study_name == study.optuna_name
    assert [t.state.name for t in storage.get_all_trials(ostudy._study_id)][:1] == ["COMPLETE"]
    storage.engine.dispose()
    db = _reopen(url, monkeypatch)  # the project still opens it, and drives the study on
    assert sampling.load(url, study.optuna_name, _definition()).trials[0].state.name == "COMPLETE"
    assert advance(db, study.name).lines is not None
    assert _versions(url)[0] == _our_heads()


def _as_made_before_the_move(url: str) -> None:
    """Put a project database back into the old layout: LatencyLab's revision in ``alembic_version``
    (Optuna's row there replaced, as the old code never let Optuna stamp one), no table of its own."""
    engine = create_engine(url)
    with engine.begin() as conn:
        [ours] = heads(conn, VERSION_TABLE)
        if SHARED_TABLE in inspect(conn).get_table_names():
            conn.execute(text(f"DELETE FROM {SHARED_TABLE}"))
        else:
            conn.execute(text(f"CREATE TABLE {SHARED_TABLE} (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
        conn.execute(text(f"INSERT INTO {SHARED_TABLE} VALUES (:v)"), {"v": ours})
        conn.execute(text(f"DROP TABLE {VERSION_TABLE}"))
    engine.dispose()


def test_an_old_database_without_optuna_tables_keeps_no_alembic_version(db_url, monkeypatch):
    _reopen(db_url, monkeypatch)
    _as_made_before_the_move(db_url)
    _reopen(db_url, monkeypatch)
    assert _versions(db_url) == (_our_heads(), None)


def test_a_revision_this_code_does_not_know_is_one_line(db_url, monkeypatch):
    _reopen(db_url, monkeypatch)
    _as_made_before_the_move(db_url)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {SHARED_TABLE} SET version_num = '0042_future'"))
    engine.dispose()
    with pytest.raises(StorageError, match="no revision this version knows .* holds '0042_future'.*newer LatencyLab"):
        Database(db_url).migrate()


def test_optuna_tables_that_need_an_upgrade_are_refused_in_optunas_words(db_url, monkeypatch):
    _reopen(db_url, monkeypatch)
    sampling.rdb_storage(db_url).engine.dispose()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {SHARED_TABLE} SET version_num = 'v3.0.0.d'"))  # an older Optuna schema
    engine.dispose()
    monkeypatch.setattr(sampling, "_STORAGES", {})
    with pytest.raises(StorageError, match="Optuna cannot use the study tables .*optuna storage upgrade"):
        sampling.rdb_storage(db_url)


# Each child waits for the go file, so that all of them open the database at once.
_CHILD = """
import os, sys, time
from storage import open_database
from engine.optimize import sampling
import alembic.command, alembic.config, alembic.script, optuna.storages._rdb.models  # imported before the barrier
go = sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.002)
open_database(sys.argv[1])
sampling.rdb_storage(sys.argv[1])
"""


def _open_at_once(url: str, tmp_path: Path, count: int = 3) -> None:
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, url, str(go)], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True
        )
        for _ in range(count)
    ]
    time.sleep(6)  # let the interpreters start and import (the go file is the barrier, not this sleep)
    go.touch()
    errors = [p.communicate(timeout=600)[1] for p in procs]
    failed = [_last_error(e) for p, e in zip(procs, errors, strict=True) if p.returncode != 0]
    assert not failed, failed


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip() and not line.startswith("(Background")]
    return lines[-1] if lines else stderr


@pytest.mark.slow
def test_concurrent_first_opens_carry_the_old_database_over_once(old_copy, tmp_path):
    before = _rows(old_copy)
    _open_at_once(old_copy, tmp_path)
    ours, theirs = _versions(old_copy)
    assert ours == _our_heads() and len(theirs) == 1
    assert _rows(old_copy) == before
    _plain_optuna_accepts(old_copy)


@pytest.mark.slow
def test_concurrent_first_opens_of_optuna_on_a_new_database_stamp_it_once(tmp_path, session_dir):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    _open_at_once(url, tmp_path)
    ours, theirs = _versions(url)
    assert ours == _our_heads() and len(theirs) == 1
    _plain_optuna_accepts(url)


# -- PostgreSQL (the server of tests/storage/conftest.py; a database of its own per test) -------
def _pg_database(pg_url: str, name: str) -> str:
    engine = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return pg_url.replace("/postgres?", f"/{name}?")


@pytest.mark.slow
def test_postgresql_study_round_trip_and_carry_over(pg_url, monkeypatch, session_dir, tmp_path):
    url = _pg_database(pg_url, "roundtrip")
    _a_study_round_trip(url, monkeypatch)
    before = _rows(url)
    sampling.rdb_storage(url).engine.dispose()
    monkeypatch.setattr(sampling, "_STORAGES", {})
    _as_made_before_the_move(url)  # the layout the old main left on PostgreSQL
    with pytest.raises(RuntimeError, match="no longer compatible"):
        optuna.storages.RDBStorage(url)
    _open_at_once(url, tmp_path)  # the app and workers, at once
    ours, theirs = _versions(url)
    assert ours == _our_heads() and len(theirs) == 1
    assert _rows(url) == before
    _plain_optuna_accepts(url).engine.dispose()
    _reopen(url, monkeypatch)


@pytest.mark.slow
def test_postgresql_concurrent_first_opens_of_optuna_stamp_it_once(pg_url, session_dir, tmp_path):
    url = _pg_database(pg_url, "fresh")
    _open_at_once(url, tmp_path)
    assert _versions(url)[0] == _our_heads() and len(_versions(url)[1]) == 1
    _plain_optuna_accepts(url).engine.dispose()
