"""What workers do to jobs: claim one atomically, heartbeat, finish, give back, recover.

A worker claims a job atomically (a conditional UPDATE on SQLite, ``SELECT ... FOR
UPDATE SKIP LOCKED`` on PostgreSQL), so two workers never run the same job. A job ends
exactly once: :func:`finish` and :func:`recover_stale` change only a job that is still
running under the expected worker, and a result stored late by a job's process is
refused by :func:`storage.runs.save_run` once the job is no longer that worker's.

A failed job always has a failed run with its reason (DESIGN: "a crash, OOM or kill
ends as a failed run"): when the job's process stored none, :func:`finish` and
:func:`recover_stale` store it, in the same transaction that ends the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select, update

from storage.db import Database
from storage.job_records import (
    CANCELLED,
    DONE,
    FAILED,
    FINAL,
    LOST_AFTER_RUN,
    QUEUED,
    RUNNING,
    WORKER_LOST,
    ColumnValues,
    JobInfo,
    Recovered,
    WorkerInfo,
    aware,
    back_in_queue,
    job_info,
    now_utc,
    worker_info,
)
from storage.jsontext import skip_warning
from storage.models import JobRow, RunRow, WorkerRow
from storage.runs import NewRun, run_row

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def claim(db: Database, worker_id: str, devices: list[str]) -> JobInfo | None:
    """Atomically take the oldest queued job for one of ``devices``; None when there is none.

    Exactly one worker wins a job: on PostgreSQL the candidate row is locked with
    ``FOR UPDATE SKIP LOCKED`` (other workers skip it); on SQLite a single conditional
    ``UPDATE ... WHERE id = (oldest queued) AND status = 'queued' RETURNING id`` runs
    under the database's write lock.
    """
    if not devices:
        return None
    now = now_utc()
    values: ColumnValues = {
        "status": RUNNING,
        "worker_id": worker_id,
        "claimed_at": now,
        "heartbeat_at": now,
        "updated_at": now,
        "attempts": JobRow.attempts + 1,
        "phase": "claimed",
        "progress": 0.0,
        "progress_note": None,
        "eta_s": None,
        "started_at": None,
        "finished_at": None,
        "error": None,
        "measuring_started": False,
    }
    candidate = (
        select(JobRow.id).where(JobRow.status == QUEUED, JobRow.device.in_(devices)).order_by(JobRow.id).limit(1)
    )
    with db.session() as s:
        if db.is_sqlite:
            # One statement: SQLite takes the write lock for it, so the sub-select and
            # the update see the same queue; the status condition makes it idempotent.
            job_id = s.execute(
                update(JobRow)
                .where(JobRow.id == candidate.scalar_subquery(), JobRow.status == QUEUED)
                .values(**values)
                .returning(JobRow.id)
                .execution_options(synchronize_session=False)
            ).scalar_one_or_none()
        else:
            job_id = s.execute(candidate.with_for_update(skip_locked=True)).scalar_one_or_none()
            if job_id is not None:
                s.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id)
                    .values(**values)
                    .execution_options(synchronize_session=False)
                )
        if job_id is None:
            return None
        return job_info(s.get(JobRow, job_id, populate_existing=True))


def mark_started(db: Database, job_id: int, worker_id: str) -> None:
    """The job's process was spawned now (the start of its elapsed time)."""
    with db.session() as s:
        now = now_utc()
        s.execute(
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.worker_id == worker_id, JobRow.status == RUNNING)
            .values(started_at=now, updated_at=now, phase="starting")
        )


def finish(
    db: Database,
    job_id: int,
    worker_id: str,
    status: str,
    *,
    error: str | None = None,
    log_tail: str | None = None,
    failed_run: NewRun | None = None,
) -> JobInfo | None:
    """End a running job that ``worker_id`` holds; None if it is no longer theirs.

    ``failed_run`` (for a failed job) is stored with the job's final reason as its error,
    in the same transaction, when the job's own process stored no run.
    """
    if status not in FINAL:
        raise ValueError(f"finish status must be one of {sorted(FINAL)}")
    with db.session() as s:
        row = s.get(JobRow, job_id)
        if row is None or row.status != RUNNING or row.worker_id != worker_id:
            return None
        now = now_utc()
        row.status, row.finished_at, row.updated_at = status, now, now
        if status == DONE:
            row.progress, row.eta_s, row.phase = 1.0, 0.0, "done"
            row.error = None
        else:
            row.error = error or row.error or status
            row.eta_s = None
        if log_tail is not None:
            row.log_tail = log_tail
        if status == FAILED and row.run_id is None and failed_run is not None:
            row.run_id = _add_failed_run(s, failed_run, row.error)
        s.flush()
        return job_info(row)


def _add_failed_run(s: Session, run: NewRun, reason: str) -> int:
    """Store ``run`` as failed with ``reason`` in session ``s``; its id."""
    run_row_ = run_row(replace(run, status="failed", error=reason, metrics=None, requests=[]))
    s.add(run_row_)
    s.flush()
    return run_row_.id


def requeue(db: Database, job_id: int, worker_id: str, *, count_attempt: bool = False) -> bool:
    """Give a running job back to the queue (a worker shutting down cleanly)."""
    with db.session() as s:
        values = back_in_queue(None, now_utc())
        if not count_attempt:
            values["attempts"] = JobRow.attempts - 1
        result = s.execute(
            update(JobRow)
            .where(
                JobRow.id == job_id,
                JobRow.worker_id == worker_id,
                JobRow.status == RUNNING,
                JobRow.cancel_requested.is_(False),
                JobRow.run_id.is_(None),  # a job whose run is stored is not run again
            )
            .values(**values)
        )
        return result.rowcount == 1


def register_worker(db: Database, worker_id: str, host: str, pid: int, devices: list[str]) -> None:
    """Announce a worker (or re-announce it after a restart with the same id)."""
    now = now_utc()
    with db.session() as s:
        row = s.get(WorkerRow, worker_id)
        if row is None:
            s.add(
                WorkerRow(
                    id=worker_id,
                    host=host,
                    pid=pid,
                    devices=";".join(devices),
                    started_at=now,
                    heartbeat_at=now,
                    stopped=False,
                )
            )
        else:
            row.host, row.pid, row.devices = host, pid, ";".join(devices)
            row.started_at, row.heartbeat_at, row.stopped = now, now, False


def heartbeat(db: Database, worker_id: str, job_ids: list[int] | None = None) -> list[int]:
    """Refresh the worker's heartbeat and its running jobs'; returns ids with a cancel request."""
    now = now_utc()
    with db.session() as s:
        s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(heartbeat_at=now))
        if not job_ids:
            return []
        s.execute(
            update(JobRow)
            .where(JobRow.id.in_(job_ids), JobRow.worker_id == worker_id, JobRow.status == RUNNING)
            .values(heartbeat_at=now)
        )
        return list(s.scalars(select(JobRow.id).where(JobRow.id.in_(job_ids), JobRow.cancel_requested.is_(True))))


def cancel_requested(db: Database, job_ids: list[int]) -> list[int]:
    """Which of these jobs a user asked to cancel."""
    if not job_ids:
        return []
    with db.session() as s:
        return list(s.scalars(select(JobRow.id).where(JobRow.id.in_(job_ids), JobRow.cancel_requested.is_(True))))


def stop_worker(db: Database, worker_id: str) -> None:
    """A worker that exits cleanly says so (its jobs were re-queued or finished)."""
    with db.session() as s:
        s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(stopped=True, heartbeat_at=now_utc()))


def list_workers(db: Database, *, alive_within_s: float | None = None) -> list[WorkerInfo]:
    """Registered workers; with ``alive_within_s``, only running ones with a fresh heartbeat."""
    with db.session() as s:
        query = select(WorkerRow).order_by(WorkerRow.started_at.desc())
        if alive_within_s is not None:
            query = query.where(
                WorkerRow.stopped.is_(False), WorkerRow.heartbeat_at >= now_utc() - timedelta(seconds=alive_within_s)
            )
        return [worker_info(r) for r in s.scalars(query)]


FailedRun = Callable[[JobInfo, str], NewRun]


def recover_stale(
    db: Database,
    *,
    stale_after_s: float,
    dead_worker_ids: list[str] | None = None,
    exclude_worker: str | None = None,
    failed_run: FailedRun | None = None,
) -> list[Recovered]:
    """Recover running jobs whose worker is gone.

    A worker is gone when its heartbeat is older than ``stale_after_s`` (any host), or it
    is named in ``dead_worker_ids`` (e.g. a same-host worker whose process no longer
    exists). Each of its running jobs ends once, consistently:

    * its process already stored a run (the worker was lost before it could finish the
      job): the job ends as the run did, with the note "worker lost after the run was stored";
    * it had not started measuring (first attempt): back to the queue;
    * else failed with the reason "worker lost", and ``failed_run(job, reason)`` stored
      as its failed run. Anything its process sends later is refused (storage.runs).
    """
    cutoff = now_utc() - timedelta(seconds=stale_after_s)
    dead = set(dead_worker_ids or [])
    out: list[Recovered] = []
    with db.session() as s:
        running = s.scalars(select(JobRow).where(JobRow.status == RUNNING)).all()
        for row in running:
            if row.worker_id == exclude_worker and row.worker_id not in dead:
                continue
            beat = aware(row.heartbeat_at) or aware(row.claimed_at)
            if row.worker_id in dead or beat is None or beat < cutoff:
                action = _end_lost(s, row, failed_run)
                if action is not None:
                    out.append(Recovered(job_id=row.id, worker_id=row.worker_id, action=action))
        if dead:
            s.execute(update(WorkerRow).where(WorkerRow.id.in_(dead)).values(stopped=True))
    return out


def _end_lost(s: Session, row: JobRow, failed_run: FailedRun | None) -> str | None:
    """End one running job of a lost worker (see recover_stale); the action, or None if it changed meanwhile."""
    now = now_utc()
    stored = s.get(RunRow, row.run_id) if row.run_id is not None else None
    if stored is not None:
        action = DONE if stored.status == "done" else FAILED
        values: ColumnValues = {"status": action, "finished_at": now, "updated_at": now, "eta_s": None}
        values["progress_note"] = LOST_AFTER_RUN
        if action == DONE:
            values.update(progress=1.0, phase="done", error=None)
        else:
            values["error"] = row.error or stored.error or WORKER_LOST
    elif not row.measuring_started and (row.attempts or 0) <= 1 and not row.cancel_requested:
        values, action = back_in_queue(f"re-queued: {WORKER_LOST}", now), "requeued"
    else:
        action = CANCELLED if row.cancel_requested else FAILED
        values = {"status": action, "finished_at": now, "updated_at": now, "eta_s": None, "error": WORKER_LOST}
    result = s.execute(
        update(JobRow)
        .where(JobRow.id == row.id, JobRow.status == RUNNING, JobRow.worker_id == row.worker_id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return None
    if action == FAILED and stored is None and failed_run is not None:
        _store_lost_run(s, row, failed_run)
    return "failed" if action == CANCELLED else action


def _store_lost_run(s: Session, row: JobRow, failed_run: FailedRun) -> None:
    """The failed run of a job whose worker was lost, linked to the job (a bad spec: none, warned)."""
    try:
        run = failed_run(job_info(row), WORKER_LOST)
    except (ValueError, TypeError) as exc:
        skip_warning("failed run of job", row.id, exc)
        return
    run_id = _add_failed_run(s, run, WORKER_LOST)
    s.execute(
        update(JobRow).where(JobRow.id == row.id).values(run_id=run_id).execution_options(synchronize_session=False)
    )
