"""Façade for background jobs and the workers that run them.

Jobs live in the database so that any number of workers, on any number of hosts,
can share one queue. A worker claims a job atomically (a conditional UPDATE on
SQLite, ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL), so two workers never
run the same job. Every call is one short transaction and returns plain dataclasses.

Status life cycle: ``queued`` -> ``running`` -> ``done`` | ``failed`` | ``cancelled``;
a running job of a lost worker goes back to ``queued`` once (if it had not started
measuring) or ends ``failed`` with the reason "worker lost".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from storage.db import Database
from storage.models import JobRow, WorkerRow

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
STATUSES: tuple[str, ...] = (QUEUED, RUNNING, DONE, FAILED, CANCELLED)
FINAL: frozenset[str] = frozenset({DONE, FAILED, CANCELLED})
WORKER_LOST = "worker lost"


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


@dataclass(frozen=True)
class JobInfo:
    """One job as callers see it."""

    id: int
    status: str
    name: str | None
    sweep: str | None
    spec: dict[str, Any]
    fingerprint: str
    device: str
    timeout_s: float
    attempts: int
    worker_id: str | None
    created_at: datetime
    updated_at: datetime
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    phase: str | None
    progress: float
    progress_note: str | None
    eta_s: float | None
    measuring_started: bool
    cancel_requested: bool
    log_tail: str | None
    run_id: int | None
    error: str | None

    @property
    def spec_json(self) -> str:
        return json.dumps(self.spec, sort_keys=True, separators=(",", ":"))

    @property
    def elapsed_s(self) -> float | None:
        """Seconds since the job's process started (to its end when it has ended)."""
        if self.started_at is None:
            return None
        end = self.finished_at or _now()
        return max(0.0, (end - self.started_at).total_seconds())

    @property
    def is_final(self) -> bool:
        return self.status in FINAL


@dataclass(frozen=True)
class WorkerInfo:
    """A worker process as registered in the database."""

    id: str
    host: str
    pid: int
    devices: list[str]
    started_at: datetime
    heartbeat_at: datetime
    stopped: bool


@dataclass(frozen=True)
class Recovered:
    """What recovery did to one running job of a lost worker."""

    job_id: int
    worker_id: str | None
    action: str  # "requeued" | "failed"


def _job(row: JobRow) -> JobInfo:
    return JobInfo(
        id=row.id,
        status=row.status,
        name=row.name,
        sweep=row.sweep,
        spec=json.loads(row.spec_json),
        fingerprint=row.fingerprint,
        device=row.device,
        timeout_s=float(row.timeout_s),
        attempts=int(row.attempts or 0),
        worker_id=row.worker_id,
        created_at=_aware(row.created_at),
        updated_at=_aware(row.updated_at),
        claimed_at=_aware(row.claimed_at),
        heartbeat_at=_aware(row.heartbeat_at),
        started_at=_aware(row.started_at),
        finished_at=_aware(row.finished_at),
        phase=row.phase,
        progress=float(row.progress or 0.0),
        progress_note=row.progress_note,
        eta_s=row.eta_s,
        measuring_started=bool(row.measuring_started),
        cancel_requested=bool(row.cancel_requested),
        log_tail=row.log_tail,
        run_id=row.run_id,
        error=row.error,
    )


def _worker(row: WorkerRow) -> WorkerInfo:
    return WorkerInfo(
        id=row.id,
        host=row.host,
        pid=row.pid,
        devices=[d for d in row.devices.split(";") if d],
        started_at=_aware(row.started_at),
        heartbeat_at=_aware(row.heartbeat_at),
        stopped=bool(row.stopped),
    )


# -- queue ------------------------------------------------------------------------------
def submit(db: Database, spec: Any, *, sweep: str | None = None, timeout_s: float = 3600.0) -> int:
    """Queue one validated :class:`~engine.spec.JobSpec`; returns the job id."""
    return submit_many(db, [spec], sweep=sweep, timeout_s=timeout_s)[0]


def submit_many(db: Database, specs: list[Any], *, sweep: str | None = None, timeout_s: float = 3600.0) -> list[int]:
    """Queue several specs in one transaction (a sweep is all queued or none)."""
    if timeout_s <= 0:
        raise ValueError("timeout must be positive")
    now = _now()
    rows = [
        JobRow(
            created_at=now,
            updated_at=now,
            status=QUEUED,
            name=spec.name,
            sweep=sweep,
            spec_json=spec.canonical_json(),
            fingerprint=spec.fingerprint(),
            device=spec.device,
            timeout_s=float(timeout_s),
            attempts=0,
            progress=0.0,
            measuring_started=False,
            cancel_requested=False,
        )
        for spec in specs
    ]
    with db.session() as s:
        s.add_all(rows)
        s.flush()
        return [r.id for r in rows]


def claim(db: Database, worker_id: str, devices: list[str]) -> JobInfo | None:
    """Atomically take the oldest queued job for one of ``devices``; None when there is none.

    Exactly one worker wins a job: on PostgreSQL the candidate row is locked with
    ``FOR UPDATE SKIP LOCKED`` (other workers skip it); on SQLite a single conditional
    ``UPDATE ... WHERE id = (oldest queued) AND status = 'queued' RETURNING id`` runs
    under the database's write lock.
    """
    if not devices:
        return None
    now = _now()
    values: dict[str, Any] = {
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
        return _job(s.get(JobRow, job_id, populate_existing=True))


def mark_started(db: Database, job_id: int, worker_id: str) -> None:
    """The job's process was spawned now (the start of its elapsed time)."""
    with db.session() as s:
        now = _now()
        s.execute(
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.worker_id == worker_id, JobRow.status == RUNNING)
            .values(started_at=now, updated_at=now, phase="starting")
        )


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
    values: dict[str, Any] = {
        "phase": phase[:32],
        "progress": max(0.0, min(1.0, float(fraction))),
        "progress_note": (note or None) and note[:500],
        "eta_s": eta_s,
        "updated_at": _now(),
    }
    if measuring_started:
        values["measuring_started"] = True
    with db.session() as s:
        result = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == RUNNING).values(**values))
        return result.rowcount == 1


def set_result(db: Database, job_id: int, *, run_id: int | None = None, error: str | None = None) -> None:
    """The job's process reports its run id and/or failure reason (the worker sets the status)."""
    values: dict[str, Any] = {"updated_at": _now()}
    if run_id is not None:
        values["run_id"] = run_id
    if error is not None:
        values["error"] = error[:4000]
    with db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == RUNNING).values(**values))


def set_log_tail(db: Database, job_id: int, tail: str) -> None:
    """Keep the last lines of the job's log on the job (shown on the Jobs page)."""
    with db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(log_tail=tail))


def finish(
    db: Database, job_id: int, worker_id: str, status: str, *, error: str | None = None, log_tail: str | None = None
) -> JobInfo | None:
    """End a running job that ``worker_id`` holds; None if it is no longer theirs."""
    if status not in FINAL:
        raise ValueError(f"finish status must be one of {sorted(FINAL)}")
    with db.session() as s:
        row = s.get(JobRow, job_id)
        if row is None or row.status != RUNNING or row.worker_id != worker_id:
            return None
        now = _now()
        row.status, row.finished_at, row.updated_at = status, now, now
        if status == DONE:
            row.progress, row.eta_s, row.phase = 1.0, 0.0, "done"
            row.error = None
        else:
            row.error = error or row.error or status
            row.eta_s = None
        if log_tail is not None:
            row.log_tail = log_tail
        s.flush()
        return _job(row)


def _back_in_queue(note: str | None, now: datetime) -> dict[str, Any]:
    """The column values of a running job handed back to the queue."""
    return {
        "status": QUEUED,
        "worker_id": None,
        "claimed_at": None,
        "heartbeat_at": None,
        "started_at": None,
        "phase": None,
        "progress": 0.0,
        "progress_note": note,
        "eta_s": None,
        "measuring_started": False,
        "run_id": None,
        "updated_at": now,
    }


def requeue(db: Database, job_id: int, worker_id: str, *, count_attempt: bool = False) -> bool:
    """Give a running job back to the queue (a worker shutting down cleanly)."""
    with db.session() as s:
        values = _back_in_queue(None, _now())
        if not count_attempt:
            values["attempts"] = JobRow.attempts - 1
        result = s.execute(
            update(JobRow)
            .where(
                JobRow.id == job_id,
                JobRow.worker_id == worker_id,
                JobRow.status == RUNNING,
                JobRow.cancel_requested.is_(False),
            )
            .values(**values)
        )
        return result.rowcount == 1


def cancel(db: Database, job_id: int) -> JobInfo | None:
    """Cancel a job: a queued one ends at once, a running one is stopped by its worker.

    Returns the job after the change, or None when there is no such job. A job that
    has already ended is returned unchanged.
    """
    with db.session() as s:
        row = s.get(JobRow, job_id)
        if row is None:
            return None
        now = _now()
        if row.status == QUEUED:
            row.status, row.finished_at, row.updated_at, row.error = CANCELLED, now, now, "cancelled before it started"
        elif row.status == RUNNING:
            row.cancel_requested, row.updated_at = True, now
        s.flush()
        return _job(row)


def retry(db: Database, job_id: int) -> int | None:
    """Queue a copy of a failed or cancelled job (same spec, sweep and timeout); the new id."""
    with db.session() as s:
        row = s.get(JobRow, job_id)
        if row is None or row.status not in (FAILED, CANCELLED):
            return None
        now = _now()
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
        )
        s.add(new)
        s.flush()
        return new.id


def get_job(db: Database, job_id: int) -> JobInfo | None:
    """One job, or None."""
    with db.session() as s:
        row = s.get(JobRow, job_id)
        return None if row is None else _job(row)


def list_jobs(
    db: Database, *, limit: int = 200, statuses: list[str] | None = None, sweep: str | None = None
) -> list[JobInfo]:
    """Newest first."""
    with db.session() as s:
        query = select(JobRow).order_by(JobRow.id.desc()).limit(limit)
        if statuses:
            query = query.where(JobRow.status.in_(statuses))
        if sweep:
            query = query.where(JobRow.sweep == sweep)
        return [_job(r) for r in s.scalars(query)]


def busy_devices(db: Database) -> dict[str, int]:
    """Devices with a running job: device -> job id."""
    with db.session() as s:
        rows = s.execute(select(JobRow.device, JobRow.id).where(JobRow.status == RUNNING)).all()
        return {device: job_id for device, job_id in rows}


# -- workers ----------------------------------------------------------------------------
def register_worker(db: Database, worker_id: str, host: str, pid: int, devices: list[str]) -> None:
    """Announce a worker (or re-announce it after a restart with the same id)."""
    now = _now()
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
    now = _now()
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
        s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(stopped=True, heartbeat_at=_now()))


def list_workers(db: Database, *, alive_within_s: float | None = None) -> list[WorkerInfo]:
    """Registered workers; with ``alive_within_s``, only running ones with a fresh heartbeat."""
    with db.session() as s:
        query = select(WorkerRow).order_by(WorkerRow.started_at.desc())
        if alive_within_s is not None:
            query = query.where(
                WorkerRow.stopped.is_(False), WorkerRow.heartbeat_at >= _now() - timedelta(seconds=alive_within_s)
            )
        return [_worker(r) for r in s.scalars(query)]


def recover_stale(
    db: Database, *, stale_after_s: float, dead_worker_ids: list[str] | None = None, exclude_worker: str | None = None
) -> list[Recovered]:
    """Recover running jobs whose worker is gone.

    A worker is gone when its heartbeat is older than ``stale_after_s`` (any host), or it
    is named in ``dead_worker_ids`` (e.g. a same-host worker whose process no longer
    exists). Each of its running jobs goes back to the queue once if it had not started
    measuring; otherwise it ends failed with the reason "worker lost".
    """
    cutoff = _now() - timedelta(seconds=stale_after_s)
    dead = set(dead_worker_ids or [])
    out: list[Recovered] = []
    with db.session() as s:
        running = s.scalars(select(JobRow).where(JobRow.status == RUNNING)).all()
        for row in running:
            if row.worker_id == exclude_worker and row.worker_id not in dead:
                continue
            beat = _aware(row.heartbeat_at) or _aware(row.claimed_at)
            lost = row.worker_id in dead or beat is None or beat < cutoff
            if not lost:
                continue
            now = _now()
            if not row.measuring_started and (row.attempts or 0) <= 1 and not row.cancel_requested:
                values = _back_in_queue(f"re-queued: {WORKER_LOST}", now)
                action = "requeued"
            else:
                values = {
                    "status": CANCELLED if row.cancel_requested else FAILED,
                    "finished_at": now,
                    "updated_at": now,
                    "eta_s": None,
                    "error": WORKER_LOST,
                }
                action = "failed"
            job_id, owner = row.id, row.worker_id
            result = s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.status == RUNNING, JobRow.worker_id == owner)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount == 1:
                out.append(Recovered(job_id=job_id, worker_id=owner, action=action))
        if dead:
            s.execute(update(WorkerRow).where(WorkerRow.id.in_(dead)).values(stopped=True))
    return out
