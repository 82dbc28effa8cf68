"""Who did what (migration 0003_audit): submitted_by / cancelled_by / deleted_by on jobs,
submitted_by on runs (inherited from the job; ``cli:<user>`` for a run without a job)."""

from __future__ import annotations

import getpass
import json

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from engine.cli.main import main
from engine.spec import parse_job_spec
from storage import jobs, open_database
from storage.db import MIGRATIONS
from storage.runs import NewRun, delete_run, get_run, list_runs, save_run


def _spec(seed: int = 0):
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, "seed": seed},
        }
    )


def _run(job_id: int | None = None) -> NewRun:
    spec = _spec()
    return NewRun(
        status="failed", spec=spec.model_dump(mode="json"), fingerprint=spec.fingerprint(), model="demo",
        engine="transformers", device="cpu", error="x", job_id=job_id,
    )  # fmt: skip


def test_upgrade_from_0002_keeps_rows_and_adds_the_columns(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url)
    command.upgrade(cfg, "0002_hardware")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO jobs (created_at, updated_at, status, spec_json, fingerprint, device, timeout_s, attempts,"
                " progress, measuring_started, cancel_requested) VALUES"
                " ('2026-01-01', '2026-01-01', 'queued', '{}', 'f', 'cpu', 60, 0, 0, 0, 0)"
            )
        )
    command.upgrade(cfg, "0003_audit")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("jobs")}
    assert {"submitted_by", "cancelled_by", "deleted_by"} <= columns
    assert "submitted_by" in {c["name"] for c in sa.inspect(engine).get_columns("runs")}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT status, submitted_by FROM jobs")).all() == [("queued", None)]
    command.downgrade(cfg, "0002_hardware")
    assert "submitted_by" not in {c["name"] for c in sa.inspect(engine).get_columns("jobs")}
    engine.dispose()


def test_submit_cancel_retry_record_who(db):
    first, second = jobs.submit_many(db, [_spec(0), _spec(1)], submitted_by="olga@lab.example")
    assert jobs.get_job(db, first).submitted_by == "olga@lab.example"
    assert jobs.cancel(db, first, by="ada@lab.example").cancelled_by == "ada@lab.example"
    assert jobs.cancel(db, first, by="eve@lab.example").cancelled_by == "ada@lab.example"  # already ended
    again = jobs.retry(db, first, by="vic@lab.example")
    assert jobs.get_job(db, again).submitted_by == "vic@lab.example"
    jobs.claim(db, "w1", ["cpu"])
    jobs.mark_started(db, second, "w1")
    running = jobs.cancel(db, second, by="ada@lab.example")
    assert running.cancel_requested and running.cancelled_by == "ada@lab.example"
    assert (
        jobs.submit(db, _spec(2), submitted_by="x" * 500)
        and max(len(j.submitted_by or "") for j in jobs.list_jobs(db)) == 200
    )


def test_a_run_inherits_its_jobs_submitter_and_the_job_keeps_who_deleted_it(db):
    job_id = jobs.submit(db, _spec(), submitted_by="olga@lab.example")
    run_id = save_run(db, _run(job_id))
    assert get_run(db, run_id).submitted_by == "olga@lab.example"
    assert list_runs(db)[0].submitted_by == "olga@lab.example"
    assert delete_run(db, run_id, by="ada@lab.example")
    assert jobs.get_job(db, job_id).deleted_by == "ada@lab.example"
    assert not delete_run(db, run_id, by="eve@lab.example")  # nothing left to delete: unchanged
    assert jobs.get_job(db, job_id).deleted_by == "ada@lab.example"


def test_a_run_without_a_job_is_the_clis(db):
    assert get_run(db, save_run(db, _run())).submitted_by == f"cli:{getpass.getuser()}"


def test_cli_submit_cancel_and_retry_record_the_os_user(db_url, capsys):
    db = open_database(db_url)
    args = ["--model", "demo", "--prompt-tokens", "16", "--output-tokens", "4", "--requests", "2", "--db", db_url]
    assert main(["submit", *args]) == 0
    (job,) = jobs.list_jobs(db)
    me = f"cli:{getpass.getuser()}"
    assert job.submitted_by == me
    assert main(["cancel", str(job.id), "--db", db_url]) == 0
    assert jobs.get_job(db, job.id).cancelled_by == me
    assert main(["retry", str(job.id), "--db", db_url]) == 0
    assert jobs.list_jobs(db)[0].submitted_by == me
    capsys.readouterr()
    assert main(["jobs", "--json", "--db", db_url]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(j["submitted_by"], j["cancelled_by"]) for j in listed] == [(me, None), (me, me)]
