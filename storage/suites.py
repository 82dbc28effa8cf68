"""Façade for benchmark suites: stored definitions, the jobs queued for their entries, schedules.

A suite's definition is validated by :mod:`engine.jobs.suites` and stored here as JSON by
name. Every job queued for a suite entry is recorded with the suite, the entry, the spec
fingerprint and an optional *tag*, so a later check can name a baseline ("the runs of the
jobs queued under tag ``v1.2``"). A schedule's due time is claimed with one conditional
UPDATE in the same transaction that queues its jobs, so two workers sharing a database
queue a due suite once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, cast

from sqlalchemy import func, or_, select, update

from storage.db import Database, StorageError
from storage.job_records import DONE, aware, now_utc
from storage.jobs import new_job_rows
from storage.jsontext import dumps, loads, loads_object, loads_or_none
from storage.models import JobRow, RunRow, SuiteJobRow, SuiteRow, SuiteScheduleRow

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from engine.jsonvalue import JSONObject
    from engine.spec import JobSpec
    from storage.columns import Knobs

Entries = Sequence[tuple[str, "JobSpec"]]  # (entry name, its job spec), in the suite's order


@dataclass(frozen=True)
class StoredSuite:
    """A suite definition as stored: its name, body (the validated JSON) and source file."""

    name: str
    body: JSONObject
    source: str | None
    updated_at: datetime
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """A suite queued on a cron schedule."""

    id: int
    suite: str
    file: str | None
    cron: str
    tag: str | None
    created_at: datetime
    since_ts: int
    last_due_ts: int | None
    last_queued_at: datetime | None
    last_job_ids: tuple[int, ...]


@dataclass(frozen=True)
class FingerprintInfo:
    """One spec fingerprint among the stored runs: a label, its model and engine, how many runs, and
    ``knobs``: its newest run's recipe knobs and workload fields off their defaults (``{"recipe": ...}``)."""

    fingerprint: str
    name: str | None
    model: str
    engine: str
    runs: int
    last_at: datetime
    knobs: Knobs = field(default_factory=dict)


# -- definitions ---------------------------------------------------------------------------
def save_suite(db: Database, name: str, body: JSONObject, source: str | None = None) -> None:
    """Store (or replace) the definition of suite ``name``."""
    now = now_utc()
    text = dumps(body, sort_keys=True)
    with db.session() as s:
        row = s.scalar(select(SuiteRow).where(SuiteRow.name == name))
        if row is None:
            s.add(SuiteRow(name=name, body_json=text, source=source, created_at=now, updated_at=now))
        else:
            row.body_json, row.source, row.updated_at = text, source, now


def get_suite(db: Database, name: str) -> StoredSuite | None:
    """The stored suite ``name``, or None."""
    with db.session() as s:
        row = s.scalar(select(SuiteRow).where(SuiteRow.name == name))
        if row is None:
            return None
        return StoredSuite(row.name, loads_object(row.body_json), row.source, aware(row.updated_at), _tags(s, row.name))


def list_suites(db: Database) -> list[StoredSuite]:
    """Every stored suite, by name, with the tags its jobs were queued under."""
    with db.session() as s:
        rows = s.scalars(select(SuiteRow).order_by(SuiteRow.name)).all()
        return [
            StoredSuite(r.name, loads_object(r.body_json), r.source, aware(r.updated_at), _tags(s, r.name))
            for r in rows
        ]


def _tags(s: Session, suite: str) -> tuple[str, ...]:
    stmt = (
        select(SuiteJobRow.tag)
        .where(SuiteJobRow.suite == suite, SuiteJobRow.tag.is_not(None))
        .group_by(SuiteJobRow.tag)
        .order_by(func.max(SuiteJobRow.id).desc())
    )
    return tuple(s.scalars(stmt))


# -- queueing ------------------------------------------------------------------------------
def _queue(s: Session, suite: str, items: Entries, tag: str | None, timeout_s: float) -> list[int]:
    """Add one job per (entry, spec) and its suite record to session ``s``; the job ids."""
    rows = new_job_rows([spec for _entry, spec in items], timeout_s=timeout_s)
    s.add_all(rows)
    s.flush()
    now = now_utc()
    s.add_all(
        SuiteJobRow(suite=suite, entry=entry, tag=tag, fingerprint=spec.fingerprint(), job_id=row.id, created_at=now)
        for (entry, spec), row in zip(items, rows, strict=True)
    )
    return [r.id for r in rows]


def queue_suite(
    db: Database, suite: str, items: Entries, tag: str | None = None, timeout_s: float = 3600.0
) -> list[int]:
    """Queue one job per ``(entry name, JobSpec)`` in one transaction (all or none); the job ids."""
    with db.session() as s:
        return _queue(s, suite, items, tag, timeout_s)


def tagged_runs(db: Database, suite: str, tag: str) -> dict[str, int]:
    """``{entry: run id}``: per entry, the newest finished (done) run of a job queued under ``tag``."""
    stmt = (
        select(SuiteJobRow.entry, JobRow.run_id)
        .join(JobRow, JobRow.id == SuiteJobRow.job_id)
        .join(RunRow, RunRow.id == JobRow.run_id)
        .where(SuiteJobRow.suite == suite, SuiteJobRow.tag == tag, RunRow.status == DONE)
        .order_by(SuiteJobRow.id)
    )
    with db.session() as s:
        return {entry: run_id for entry, run_id in s.execute(stmt)}  # later rows (newer) win


def has_tag(db: Database, suite: str, tag: str) -> bool:
    """Whether any job of ``suite`` was queued under ``tag`` (finished or not)."""
    with db.session() as s:
        stmt = select(SuiteJobRow.id).where(SuiteJobRow.suite == suite, SuiteJobRow.tag == tag).limit(1)
        return s.scalar(stmt) is not None


def newest_runs(db: Database, fingerprints: list[str]) -> dict[str, int]:
    """``{fingerprint: run id}``: the newest stored measured run (any status) of each fingerprint (predicted
    runs are never a gate's baseline or newest run)."""
    if not fingerprints:
        return {}
    stmt = (
        select(RunRow.fingerprint, func.max(RunRow.id))
        .where(RunRow.fingerprint.in_(fingerprints), RunRow.predicted.is_(False))
        .group_by(RunRow.fingerprint)
    )
    with db.session() as s:
        return {fp: int(run_id) for fp, run_id in s.execute(stmt)}


def fingerprint_run_ids(db: Database, fingerprint: str, limit: int = 500) -> list[int]:
    """The done measured runs of one fingerprint, oldest first (the newest ``limit``): a history never holds a
    predicted run."""
    stmt = (
        select(RunRow.id)
        .where(RunRow.fingerprint == fingerprint, RunRow.status == DONE, RunRow.predicted.is_(False))
        .order_by(RunRow.id.desc())
        .limit(limit)
    )
    with db.session() as s:
        return sorted(s.scalars(stmt))


def fingerprints(db: Database, limit: int = 200) -> list[FingerprintInfo]:
    """Fingerprints of done measured runs, most runs first (then newest): what a history can be drawn for."""
    stmt = (
        select(RunRow.fingerprint, func.count(RunRow.id), func.max(RunRow.id), func.max(RunRow.created_at))
        .where(RunRow.status == DONE, RunRow.predicted.is_(False))
        .group_by(RunRow.fingerprint)
        .order_by(func.count(RunRow.id).desc(), func.max(RunRow.id).desc())
        .limit(limit)
    )
    with db.session() as s:
        groups = s.execute(stmt).all()
        newest = {r.id: r for r in s.scalars(select(RunRow).where(RunRow.id.in_([g[2] for g in groups])))}
        return [
            FingerprintInfo(
                fp, newest[top].name, newest[top].model, newest[top].engine, int(n), aware(last), _knobs(newest[top])
            )
            for fp, n, top, last in groups
        ]


def _knobs(row: RunRow) -> Knobs:
    """A run row's knobs off their defaults (older rows: from their spec); {} when unreadable."""
    try:
        if row.knobs_json is None:
            from storage.columns import changed_fields

            return changed_fields(loads(row.spec_json), row.engine)
        knobs = loads(row.knobs_json)
    except (ValueError, TypeError):
        return {}
    return cast("Knobs", knobs) if isinstance(knobs, dict) else {}  # what changed_fields gave


# -- schedules -----------------------------------------------------------------------------
def _schedule(row: SuiteScheduleRow) -> Schedule:
    return Schedule(
        id=row.id,
        suite=row.suite,
        file=row.file,
        cron=row.cron,
        tag=row.tag,
        created_at=aware(row.created_at),
        since_ts=int(row.since_ts),
        last_due_ts=row.last_due_ts,
        last_queued_at=aware(row.last_queued_at),
        last_job_ids=tuple(cast("list[int]", loads_or_none(row.last_job_ids) or [])),
    )


def set_schedule(
    db: Database, suite: str, cron: str, *, since_ts: int, file: str | None = None, tag: str | None = None
) -> Schedule:
    """Schedule ``suite`` (replacing its schedule): due times after ``since_ts`` will be queued."""
    with db.session() as s:
        row = s.scalar(select(SuiteScheduleRow).where(SuiteScheduleRow.suite == suite))
        if row is None:
            row = SuiteScheduleRow(suite=suite, created_at=now_utc())
            s.add(row)
        row.cron, row.file, row.tag, row.since_ts, row.last_due_ts = cron, file, tag, since_ts, None
        s.flush()
        return _schedule(row)


def list_schedules(db: Database) -> list[Schedule]:
    with db.session() as s:
        return [_schedule(r) for r in s.scalars(select(SuiteScheduleRow).order_by(SuiteScheduleRow.suite))]


def remove_schedule(db: Database, suite: str) -> bool:
    with db.session() as s:
        row = s.scalar(select(SuiteScheduleRow).where(SuiteScheduleRow.suite == suite))
        if row is None:
            return False
        s.delete(row)
        return True


def claim_due(
    db: Database, schedule_id: int, due_ts: int, items: Entries, timeout_s: float = 3600.0
) -> list[int] | None:
    """Claim due time ``due_ts`` of a schedule and queue its suite, in one transaction.

    Returns the job ids, or None when the due time was claimed already (by another worker,
    or an earlier round) or is not after the schedule's start. The claim is one conditional
    UPDATE, so of two workers on one database exactly one queues the suite.
    """
    with db.session() as s:
        row = s.get(SuiteScheduleRow, schedule_id)
        if row is None:
            return None
        suite, tag = row.suite, row.tag
        claimed = s.execute(
            update(SuiteScheduleRow)
            .where(
                SuiteScheduleRow.id == schedule_id,
                SuiteScheduleRow.since_ts < due_ts,
                or_(SuiteScheduleRow.last_due_ts.is_(None), SuiteScheduleRow.last_due_ts < due_ts),
            )
            .values(last_due_ts=due_ts, last_queued_at=now_utc())
            .execution_options(synchronize_session=False)
        )
        if claimed.rowcount != 1:
            return None
        job_ids = _queue(s, suite, items, tag, timeout_s) if items else []
        s.execute(
            update(SuiteScheduleRow)
            .where(SuiteScheduleRow.id == schedule_id)
            .values(last_job_ids=dumps(job_ids))
            .execution_options(synchronize_session=False)
        )
        return job_ids


__all__ = [
    "FingerprintInfo",
    "Schedule",
    "StorageError",
    "StoredSuite",
    "claim_due",
    "fingerprint_run_ids",
    "fingerprints",
    "get_suite",
    "has_tag",
    "list_schedules",
    "list_suites",
    "newest_runs",
    "queue_suite",
    "remove_schedule",
    "save_suite",
    "set_schedule",
    "tagged_runs",
]
