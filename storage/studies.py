"""Façade for recipe studies: their definitions and status, and every trial's job, run and outcome.

A study is a search of the recipe space driven by :mod:`engine.optimize.driver`; Optuna keeps
its sampler state in its own tables of the same database, and these rows are what LatencyLab
shows: the definition (validated JSON), the status (``running`` -> ``paused`` <-> ``running``
-> ``stopped`` | ``done``) and one row per trial, linked to the job that measures it and the run
it produced. A trial's job is queued in the same transaction that records the trial, so a
study never has a job it does not know of. One process advances a study at a time: it holds
the study's lease (:func:`try_lock`), a conditional UPDATE with an expiry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar, cast

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError

from storage.db import Database, StorageError
from storage.job_records import aware, now_utc
from storage.jobs import new_job_rows
from storage.jsontext import dumps, loads_object, loads_object_or_none, loads_or_none, skip_warning
from storage.models import JobRow, RunRow, StudyRow, StudyTrialRow

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping, JSONObject
    from engine.spec import JobSpec

RUNNING, PAUSED, STOPPED, DONE = "running", "paused", "stopped", "done"
STUDY_STATUSES: tuple[str, ...] = (RUNNING, PAUSED, STOPPED, DONE)
PENDING, COMPLETE, FAILED, PRUNED, DUPLICATE = "pending", "complete", "failed", "pruned", "duplicate"
TRIAL_STATUSES: tuple[str, ...] = (PENDING, COMPLETE, FAILED, PRUNED, DUPLICATE)
# Which status a user (or the driver) may move a study to, from which.
_MOVES: dict[str, tuple[str, ...]] = {
    PAUSED: (RUNNING,),
    RUNNING: (PAUSED,),
    STOPPED: (RUNNING, PAUSED),
    DONE: (RUNNING, PAUSED),
}
_T = TypeVar("_T")
_Row = TypeVar("_Row", StudyRow, StudyTrialRow)


@dataclass(frozen=True)
class StudyInfo:
    """A study as callers see it."""

    id: int
    name: str
    optuna_name: str
    definition: JSONObject
    status: str
    note: str | None
    created_at: datetime
    updated_at: datetime
    submitted_by: str | None

    @property
    def is_final(self) -> bool:
        return self.status in (STOPPED, DONE)


@dataclass(frozen=True)
class TrialInfo:
    """One trial: its recipe (params), job, run, values, constraints and the estimator's prediction."""

    id: int
    study_id: int
    number: int
    status: str
    params: JSONObject  # the trial's recipe knobs: JSON scalars
    fingerprint: str | None
    job_id: int | None
    run_id: int | None
    reused: bool
    attempts: int
    values: list[float] | None
    measured: dict[str, float | None]  # the figures of its run the study reads
    constraints: JSONObject  # one check per constraint (engine.optimize.evaluate.Check)
    feasible: bool | None
    reason: str | None
    predicted: JSONObject
    created_at: datetime
    updated_at: datetime


def _study(row: StudyRow) -> StudyInfo:
    return StudyInfo(
        id=row.id,
        name=row.name,
        optuna_name=row.optuna_name,
        definition=loads_object(row.definition_json),
        status=row.status,
        note=row.note,
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        submitted_by=row.submitted_by,
    )


def _trial(row: StudyTrialRow) -> TrialInfo:
    return TrialInfo(
        id=row.id,
        study_id=row.study_id,
        number=row.number,
        status=row.status,
        params=loads_object(row.params_json),
        fingerprint=row.fingerprint,
        job_id=row.job_id,
        run_id=row.run_id,
        reused=bool(row.reused),
        attempts=int(row.attempts or 0),
        values=cast("list[float] | None", loads_or_none(row.values_json)),
        measured=cast("dict[str, float | None]", loads_or_none(row.measured_json) or {}),
        constraints=loads_object_or_none(row.constraints_json) or {},
        feasible=row.feasible,
        reason=row.reason,
        predicted=loads_object_or_none(row.predicted_json) or {},
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
    )


def _readable(rows: Iterable[_Row], make: Callable[[_Row], _T], kind: str) -> list[_T]:
    """``make(row)`` for every row whose JSON reads; the others are skipped with a warning naming them."""
    out = []
    for row in rows:
        try:
            out.append(make(row))
        except (ValueError, TypeError) as exc:
            skip_warning(kind, row.id, exc)
    return out


# -- studies ------------------------------------------------------------------------------------
def create_study(db: Database, name: str, definition: JSONObject, *, submitted_by: str | None = None) -> StudyInfo:
    """Store a new study (status running); ValueError with one line when the name is taken."""
    now = now_utc()
    row = StudyRow(
        name=name,
        optuna_name=f"latencylab:{name}",
        definition_json=dumps(definition, sort_keys=True),
        status=RUNNING,
        created_at=now,
        updated_at=now,
        submitted_by=submitted_by[:200] if submitted_by else None,
    )
    try:
        with db.session() as s:
            s.add(row)
            s.flush()
            return _study(row)
    except StorageError as exc:
        if isinstance(exc.__cause__, IntegrityError):
            raise ValueError(f"a study named {name!r} exists already; pick another name") from exc
        raise


def get_study(db: Database, key: str | int) -> StudyInfo | None:
    """A study by name (or by id when ``key`` is an int), or None."""
    with db.session() as s:
        where = StudyRow.id == key if isinstance(key, int) else StudyRow.name == key
        row = s.scalar(select(StudyRow).where(where))
        return None if row is None else _study(row)


def list_studies(db: Database, limit: int = 200, statuses: tuple[str, ...] | None = None) -> list[StudyInfo]:
    """Newest first; a study whose stored definition cannot be read is skipped (with a warning)."""
    stmt = select(StudyRow).order_by(StudyRow.id.desc()).limit(limit)
    if statuses:
        stmt = stmt.where(StudyRow.status.in_(statuses))
    with db.session() as s:
        return _readable(s.scalars(stmt), _study, "study")


def set_status(db: Database, study_id: int, status: str, note: str | None = None) -> StudyInfo | None:
    """Move a study to ``status`` when allowed from where it is (see the module doc); the study
    after the call (unchanged when the move is not allowed), or None when there is none."""
    if status not in _MOVES:
        raise ValueError(f"unknown study status {status!r}")
    with db.session() as s:
        row = s.get(StudyRow, study_id)
        if row is None:
            return None
        if row.status in _MOVES[status]:
            row.status, row.updated_at = status, now_utc()
            if note is not None:
                row.note = note[:2000]
        s.flush()
        return _study(row)


def set_note(db: Database, study_id: int, note: str | None) -> None:
    """The study's note: the last error the driver met, or why it ended."""
    with db.session() as s:
        s.execute(update(StudyRow).where(StudyRow.id == study_id).values(note=note and note[:2000]))


def try_lock(db: Database, study_id: int, owner: str, ttl_s: float = 60.0) -> bool:
    """Take the study's lease for ``ttl_s`` seconds (free, expired, or already ``owner``'s); True when taken."""
    now = now_utc()
    with db.session() as s:
        result = s.execute(
            update(StudyRow)
            .where(
                StudyRow.id == study_id,
                or_(StudyRow.lock_owner.is_(None), StudyRow.lock_owner == owner, StudyRow.lock_until < now),
            )
            .values(lock_owner=owner, lock_until=now + timedelta(seconds=ttl_s))
        )
        return result.rowcount == 1


def unlock(db: Database, study_id: int, owner: str) -> None:
    """Give the lease back (only ``owner``'s)."""
    with db.session() as s:
        s.execute(
            update(StudyRow)
            .where(StudyRow.id == study_id, StudyRow.lock_owner == owner)
            .values(lock_owner=None, lock_until=None)
        )


# -- trials ------------------------------------------------------------------------------------
def add_trial(
    db: Database,
    study_id: int,
    number: int,
    params: JSONMapping,
    *,
    status: str = PENDING,
    spec: JobSpec | None = None,
    timeout_s: float = 3600.0,
    submitted_by: str | None = None,
    **fields: object,
) -> TrialInfo:
    """Record trial ``number``; with ``spec`` its job is queued in the same transaction (linked as
    ``job_id``). ``fields``: any of :func:`update_trial`'s."""
    now = now_utc()
    row = StudyTrialRow(
        study_id=study_id,
        number=number,
        status=status,
        params_json=dumps(params, sort_keys=True),
        reused=False,
        attempts=0,
        created_at=now,
        updated_at=now,
    )
    _apply(row, fields)
    with db.session() as s:
        if spec is not None:
            [job] = new_job_rows([spec], timeout_s=timeout_s, submitted_by=submitted_by)
            s.add(job)
            s.flush()
            row.job_id, row.fingerprint, row.attempts = job.id, job.fingerprint, 1
        s.add(row)
        s.flush()
        return _trial(row)


_JSON_FIELDS = {"values": "values_json", "measured": "measured_json", "constraints": "constraints_json"}
_JSON_FIELDS["predicted"] = "predicted_json"
_PLAIN_FIELDS = ("status", "fingerprint", "job_id", "run_id", "reused", "attempts", "feasible", "reason")


def _apply(row: StudyTrialRow, fields: Mapping[str, object]) -> None:
    for key, value in fields.items():
        if key in _JSON_FIELDS:
            setattr(row, _JSON_FIELDS[key], None if value is None else dumps(value, sort_keys=True))
        elif key in _PLAIN_FIELDS:
            setattr(row, key, value[:4000] if key == "reason" and isinstance(value, str) else value)
        else:
            raise TypeError(f"unknown trial field {key!r}")


def update_trial(db: Database, trial_id: int, **fields: object) -> TrialInfo | None:
    """Set fields of a trial: status, fingerprint, job_id, run_id, reused, attempts, feasible, reason,
    and the JSON ones values, measured, constraints, predicted."""
    with db.session() as s:
        row = s.get(StudyTrialRow, trial_id)
        if row is None:
            return None
        _apply(row, fields)
        row.updated_at = now_utc()
        s.flush()
        return _trial(row)


def list_trials(db: Database, study_id: int) -> list[TrialInfo]:
    """Every trial of a study, by trial number."""
    stmt = select(StudyTrialRow).where(StudyTrialRow.study_id == study_id).order_by(StudyTrialRow.number)
    with db.session() as s:
        return _readable(s.scalars(stmt), _trial, "study trial")


def trial_runs(db: Database) -> dict[int, str]:
    """Runs measured as a study's trial (reused runs left out), each as ``study NAME trial N``."""
    stmt = (
        select(StudyTrialRow.run_id, StudyTrialRow.number, StudyRow.name)
        .join(StudyRow, StudyRow.id == StudyTrialRow.study_id)
        .where(StudyTrialRow.run_id.is_not(None), StudyTrialRow.reused.is_(False))
    )
    with db.session() as s:
        return {int(run_id): f"study {name} trial {number}" for run_id, number, name in s.execute(stmt)}


def job_statuses(db: Database, job_ids: list[int]) -> dict[int, tuple[str, int | None, str | None]]:
    """job id -> (status, run id, error) for the given jobs (missing ones left out)."""
    if not job_ids:
        return {}
    with db.session() as s:
        rows = s.execute(select(JobRow.id, JobRow.status, JobRow.run_id, JobRow.error).where(JobRow.id.in_(job_ids)))
        return {job_id: (status, run_id, error) for job_id, status, run_id, error in rows}


def measured_run(db: Database, fingerprint: str, quality_keys: tuple[str, ...] = ()) -> int | None:
    """The newest done run with this spec fingerprint whose accuracy has every key in ``quality_keys``."""
    stmt = (
        select(RunRow.id, RunRow.quality_json)
        .where(RunRow.fingerprint == fingerprint, RunRow.status == "done")
        .order_by(RunRow.id.desc())
        .limit(20)
    )
    with db.session() as s:
        for run_id, quality_json in s.execute(stmt):
            try:
                quality = loads_object_or_none(quality_json) or {}
            except ValueError:
                continue
            if all(quality.get(key) is not None for key in quality_keys):
                return int(run_id)
    return None


def active_study_ids(db: Database) -> list[int]:
    """Studies a worker should advance: running ones, and any with a trial in flight."""
    with db.session() as s:
        live = select(StudyRow.id).where(StudyRow.status == RUNNING)
        busy = select(StudyTrialRow.study_id).where(StudyTrialRow.status == PENDING)
        return sorted({*s.scalars(live), *s.scalars(busy)})
