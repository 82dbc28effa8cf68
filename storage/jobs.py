"""Façade for background jobs: the queue as users and pages see it.

Jobs live in the database so that any number of workers, on any number of hosts,
can share one queue. A worker claims a job atomically (a conditional UPDATE on
SQLite, ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL), so two workers never
run the same job. Every call is one short transaction and returns plain dataclasses.

Status life cycle: ``queued`` -> ``running`` -> ``done`` | ``failed`` | ``cancelled``;
a running job of a lost worker goes back to ``queued`` once (if it had not started
measuring) or ends ``failed`` with the reason "worker lost".

Worker-side calls (claim, heartbeat, finish, recovery) live in :mod:`storage.workers`
and are re-exported here, so ``storage.jobs`` stays the one façade callers import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import func, select, update

from storage.db import Database
from storage.job_records import (
    CANCELLED,
    DONE,
    FAILED,
    FINAL,
    LOST_AFTER_RUN,
    QUEUED,
    RUNNING,
    STATUSES,
    WORKER_LOST,
    ColumnValues,
    JobInfo,
    Recovered,
    WorkerInfo,
    job_info,
    now_utc,
)
from storage.jsontext import dumps, skip_warning
from storage.models import JobRow
from storage.workers import (
    cancel_requested,
    claim,
    finish,
    heartbeat,
    list_workers,
    mark_started,
    recover_stale,
    register_worker,
    requeue,
    stop_worker,
)

if TYPE_CHECKING:
    from engine.spec import JobSpec

__all__ = [
    "CANCELLED",
    "DONE",
    "FAILED",
    "FINAL",
    "LOST_AFTER_RUN",
    "QUEUED",
    "RUNNING",
    "STATUSES",
    "STOPS_AT_SATURATION",
    "WORKER_LOST",
    "JobInfo",
    "Recovered",
    "WorkerInfo",
    "busy_devices",
    "cancel",
    "cancel_requested",
    "claim",
    "count_by_status",
    "finish",
    "get_job",
    "heartbeat",
    "list_jobs",
    "list_workers",
    "mark_started",
    "new_job_rows",
    "not_run",
    "progress",
    "recover_stale",
    "register_worker",
    "requeue",
    "retry",
    "set_log_tail",
    "set_result",
    "stop_worker",
    "submit",
    "submit_many",
]


# The note of a queued point of a sweep that stops at saturation (the Launch page's load sweep): the
# job that finds its run saturated ends the higher loads' queued jobs that carry it (engine/jobs/
# saturation_stop.py). Running jobs write their progress over it; a retried job runs whatever happens.
STOPS_AT_SATURATION = "stops at saturation: not run if a lower load of its sweep saturates"


# -- queue ------------------------------------------------------------------------------
def submit(
    db: Database, spec: JobSpec, *, sweep: str | None = None, timeout_s: float = 3600.0, submitted_by: str | None = None
) -> int:
    """Queue one validated :class:`~engine.spec.JobSpec`; returns the job id."""
    return submit_many(db, [spec], sweep=sweep, timeout_s=timeout_s, submitted_by=submitted_by)[0]


def submit_many(
    db: Database,
    specs: Sequence[JobSpec],
    *,
    sweep: str | None = None,
    timeout_s: float = 3600.0,
    submitted_by: str | None = None,
    note: str | None = None,
) -> list[int]:
    """Queue several specs in one transaction (a sweep is all queued or none); ``submitted_by``
    names who queued them (an e-mail, ``local:<user>``, ``cli:<user>``); ``note``: what the
    queued jobs say while they wait (:data:`STOPS_AT_SATURATION`)."""
    rows = new_job_rows(specs, sweep=sweep, timeout_s=timeout_s, submitted_by=submitted_by)
    for row in rows:
        row.progress_note = note
    with db.session() as s:
        s.add_all(rows)
        s.flush()
        return [r.id for r in rows]


def new_job_rows(
    specs: Sequence[JobSpec], *, sweep: str | None = None, timeout_s: float = 3600.0, submitted_by: str | None = None
) -> list[JobRow]:
    """Queued job rows for ``specs``, for a caller that adds them inside its own transaction."""
    if timeout_s <= 0:
        raise ValueError("timeout must be positive")
    if sweep is not None:
        from engine.spec.text import checked_name

        sweep = checked_name(sweep, "the sweep name")  # ValueError: too long or control characters, the cap named
    now = now_utc()
    return [
        JobRow(
            created_at=now,
            updated_at=now,
            status=QUEUED,
            name=spec.name,
            sweep=sweep,
            spec_json=dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":")),  # strict JSON
            fingerprint=spec.fingerprint(),
            device=spec.device,
            timeout_s=float(timeout_s),
            attempts=0,
            progress=0.0,
            measuring_started=False,
            cancel_requested=False,
            submitted_by=_who(submitted_by),
        )
        for spec in specs
    ]


def progress(
    db: Database,
    job_id: int,
    *,
    phase: str,
    fraction: float,
    note: str | None = None,
    eta_s: float | None = None,
    measuring_started: bool = False,
) -> bool:
    """Store live progress; False when the job is no longer running (cancelled or recovered)."""
    values: ColumnValues = {
        "phase": phase[:32],
        "progress": max(0.0, min(1.0, float(fraction))),
        "progress_note": (note or None) and note[:500],
        "eta_s": eta_s,
        "updated_at": now_utc(),
    }
    if measuring_started:
        values["measuring_started"] = True
    with db.session() as s:
        result = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == RUNNING).values(**values))
        return result.rowcount == 1


def set_result(db: Database, job_id: int, *, run_id: int | None = None, error: str | None = None) -> None:
    """The job's process reports its run id and/or failure reason (the worker sets the status)."""
    values: ColumnValues = {"updated_at": now_utc()}
    if run_id is not None:
        values["run_id"] = run_id
    if error is not None:
        values["error"] = error[:4000]
    with db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == RUNNING).values(**values))


def not_run(db: Database, job_ids: list[int], reason: str) -> list[int]:
    """End the still-queued ones of ``job_ids`` as cancelled with ``reason`` (their sweep stopped before
    them, e.g. ``not run: saturated at 8 req/s ...``); the ids ended."""
    if not job_ids:
        return []
    now = now_utc()
    with db.session() as s:
        rows = list(s.scalars(select(JobRow).where(JobRow.id.in_(job_ids), JobRow.status == QUEUED)))
        for row in rows:
            row.status, row.finished_at, row.updated_at = CANCELLED, now, now
            row.error, row.progress_note = reason[:4000], None
        return sorted(row.id for row in rows)


def set_log_tail(db: Database, job_id: int, tail: str) -> None:
    """Keep the last lines of the job's log on the job (shown on the Jobs page)."""
    with db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(log_tail=tail))


def _who(name: str | None) -> str | None:
    """An actor's name as stored (at most 200 characters)."""
    return name[:200] if name else None


def cancel(db: Database, job_id: int, *, by: str | None = None) -> JobInfo | None:
    """Cancel a job: a queued one ends at once, a running one is stopped by its worker.

    Returns the job after the change, or None when there is no such job. A job that
    has already ended is returned unchanged. ``by`` (who cancelled) is recorded once.
    """
    with db.session() as s:
        row = s.get(JobRow, job_id)
        if row is None:
            return None
        now = now_utc()
        if row.status not in (QUEUED, RUNNING):
            return job_info(row)
        if row.status == QUEUED:
            row.status, row.finished_at, row.updated_at, row.error = CANCELLED, now, now, "cancelled before it started"
        else:
            row.cancel_requested, row.updated_at = True, now
        row.cancelled_by = row.cancelled_by or _who(by)
        s.flush()
        return job_info(row)


def retry(db: Database, job_id: int, *, by: str | None = None) -> int | None:
    """Queue a copy of a failed or cancelled job (same spec, sweep and timeout); the new id,
    submitted by ``by``."""
    with db.session() as s:
        row = s.get(JobRow, job_id)
        if row is None or row.status not in (FAILED, CANCELLED):
            return None
        now = now_utc()
        new = JobRow(
            created_at=now,
            updated_at=now,
            status=QUEUED,
            name=row.name,
            sweep=row.sweep,
            spec_json=row.spec_json,
            fingerprint=row.fingerprint,
            device=row.device,
            timeout_s=row.timeout_s,
            attempts=0,
            progress=0.0,
            measuring_started=False,
            cancel_requested=False,
            submitted_by=_who(by),
        )
        s.add(new)
        s.flush()
        return new.id


def get_job(db: Database, job_id: int) -> JobInfo | None:
    """One job, or None."""
    with db.session() as s:
        row = s.get(JobRow, job_id)
        if row is None:
            return None
        found = _readable([row])
        return found[0] if found else None


def list_jobs(
    db: Database, *, limit: int = 200, statuses: list[str] | None = None, sweep: str | None = None
) -> list[JobInfo]:
    """Newest first; a job whose stored spec cannot be read is skipped (with a warning)."""
    with db.session() as s:
        query = select(JobRow).order_by(JobRow.id.desc()).limit(limit)
        if statuses:
            query = query.where(JobRow.status.in_(statuses))
        if sweep:
            query = query.where(JobRow.sweep == sweep)
        return _readable(s.scalars(query))


def _readable(rows: Iterable[JobRow]) -> list[JobInfo]:
    """Jobs whose stored spec can be read; any other is skipped with a warning naming it."""
    out = []
    for row in rows:
        try:
            out.append(job_info(row))
        except (ValueError, TypeError) as exc:
            skip_warning("job", row.id, exc)
    return out


def busy_devices(db: Database) -> dict[str, int]:
    """Devices with a running job: device -> job id."""
    with db.session() as s:
        rows = s.execute(select(JobRow.device, JobRow.id).where(JobRow.status == RUNNING)).all()
        return {device: job_id for device, job_id in rows}


def count_by_status(db: Database) -> dict[str, int]:
    """How many jobs are in each status (every status named, 0 where none): the worker's exporter's gauges."""
    with db.session() as s:
        rows = s.execute(select(JobRow.status, func.count(JobRow.id)).group_by(JobRow.status)).all()
    return {**dict.fromkeys(STATUSES, 0), **{status: int(n) for status, n in rows}}
