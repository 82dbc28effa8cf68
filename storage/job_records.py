"""The job queue's records: statuses, the dataclasses callers get, and row conversion.

Shared by :mod:`storage.jobs` (the queue as users see it) and :mod:`storage.workers`
(what workers do: claim, heartbeat, finish, recover).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from storage.jsontext import dumps, loads_object
from storage.models import JobRow, WorkerRow

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
STATUSES: tuple[str, ...] = (QUEUED, RUNNING, DONE, FAILED, CANCELLED)
FINAL: frozenset[str] = frozenset({DONE, FAILED, CANCELLED})
ColumnValues = dict[str, object]  # column name -> its new value (or a SQL expression) for update().values()
WORKER_LOST = "worker lost"
LOST_AFTER_RUN = "worker lost after the run was stored"


def now_utc() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
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
    spec: JSONObject
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
    submitted_by: str | None = None
    cancelled_by: str | None = None
    deleted_by: str | None = None  # who deleted the job's run

    @property
    def spec_json(self) -> str:
        return dumps(self.spec, sort_keys=True, separators=(",", ":"))

    @property
    def elapsed_s(self) -> float | None:
        """Seconds since the job's process started (to its end when it has ended)."""
        if self.started_at is None:
            return None
        end = self.finished_at or now_utc()
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


def job_info(row: JobRow) -> JobInfo:
    return JobInfo(
        id=row.id,
        status=row.status,
        name=row.name,
        sweep=row.sweep,
        spec=loads_object(row.spec_json),
        fingerprint=row.fingerprint,
        device=row.device,
        timeout_s=float(row.timeout_s),
        attempts=int(row.attempts or 0),
        worker_id=row.worker_id,
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        claimed_at=aware(row.claimed_at),
        heartbeat_at=aware(row.heartbeat_at),
        started_at=aware(row.started_at),
        finished_at=aware(row.finished_at),
        phase=row.phase,
        progress=float(row.progress or 0.0),
        progress_note=row.progress_note,
        eta_s=row.eta_s,
        measuring_started=bool(row.measuring_started),
        cancel_requested=bool(row.cancel_requested),
        log_tail=row.log_tail,
        run_id=row.run_id,
        error=row.error,
        submitted_by=row.submitted_by,
        cancelled_by=row.cancelled_by,
        deleted_by=row.deleted_by,
    )


def worker_info(row: WorkerRow) -> WorkerInfo:
    return WorkerInfo(
        id=row.id,
        host=row.host,
        pid=row.pid,
        devices=[d for d in row.devices.split(";") if d],
        started_at=aware(row.started_at),
        heartbeat_at=aware(row.heartbeat_at),
        stopped=bool(row.stopped),
    )


def back_in_queue(note: str | None, now: datetime) -> ColumnValues:
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
