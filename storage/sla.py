"""Façade for SLA finder searches: the definition, the probes so far, the answer.

A search is advanced by whoever calls :func:`engine.optimize.sla.advance` (every worker's
step loop, ``python -m engine sla --wait``). Every change is written at the ``version`` it
was computed from, in one transaction with the probe job it queues (if any): a caller
that lost the race changes nothing and reads the search again, so a probe is queued once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, cast

from sqlalchemy import select, update

from storage.db import Database, StorageError
from storage.job_records import ColumnValues, aware, now_utc
from storage.jobs import new_job_rows
from storage.jsontext import dumps, loads, loads_object, loads_object_or_none, skip_warning
from storage.models import SlaSearchRow

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from engine.spec import JobSpec

RUNNING, DONE, FAILED, STOPPED = "running", "done", "failed", "stopped"
FINAL: frozenset[str] = frozenset({DONE, FAILED, STOPPED})


class SearchExists(StorageError):
    """A search of that name is stored already."""


@dataclass(frozen=True)
class SlaSearch:
    """One search as stored."""

    id: int
    name: str
    definition: JSONObject
    status: str
    probes: list[JSONObject]
    answer: JSONObject | None
    error: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    submitted_by: str | None

    @property
    def is_final(self) -> bool:
        return self.status in FINAL


def _search(row: SlaSearchRow) -> SlaSearch:
    return SlaSearch(
        id=row.id,
        name=row.name,
        definition=loads_object(row.definition_json),
        status=row.status,
        probes=cast("list[JSONObject]", loads(row.probes_json or "[]")),
        answer=loads_object_or_none(row.answer_json),
        error=row.error,
        version=int(row.version or 0),
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        submitted_by=row.submitted_by,
    )


def create(db: Database, name: str, definition: JSONObject, *, submitted_by: str | None = None) -> SlaSearch:
    """Store a new running search; :class:`SearchExists` when the name is taken."""
    with db.session() as s:
        if s.scalar(select(SlaSearchRow.id).where(SlaSearchRow.name == name)) is not None:
            raise SearchExists(f"an SLA search named {name!r} exists already; pick another --name")
        now = now_utc()
        row = SlaSearchRow(
            name=name[:200],
            definition_json=dumps(definition, sort_keys=True),
            status=RUNNING,
            probes_json="[]",
            version=0,
            created_at=now,
            updated_at=now,
            submitted_by=submitted_by[:200] if submitted_by else None,
        )
        s.add(row)
        s.flush()
        return _search(row)


def get_search(db: Database, search_id: int) -> SlaSearch | None:
    """One search by id, or None."""
    with db.session() as s:
        row = s.get(SlaSearchRow, search_id)
        return None if row is None else _search(row)


def find(db: Database, name: str) -> SlaSearch | None:
    """One search by name, or None."""
    with db.session() as s:
        row = s.scalars(select(SlaSearchRow).where(SlaSearchRow.name == name)).first()
        return None if row is None else _search(row)


def list_searches(db: Database, *, statuses: list[str] | None = None, limit: int = 100) -> list[SlaSearch]:
    """Newest first; a search whose stored JSON cannot be read is skipped with a warning."""
    stmt = select(SlaSearchRow).order_by(SlaSearchRow.id.desc()).limit(limit)
    if statuses:
        stmt = stmt.where(SlaSearchRow.status.in_(statuses))
    out = []
    with db.session() as s:
        for row in s.scalars(stmt):
            try:
                out.append(_search(row))
            except (ValueError, TypeError) as exc:
                skip_warning("sla search", row.id, exc)
    return out


def running_ids(db: Database) -> list[int]:
    """Ids of the searches still running (cheap: the worker asks every few seconds)."""
    with db.session() as s:
        return list(s.scalars(select(SlaSearchRow.id).where(SlaSearchRow.status == RUNNING)))


def save(
    db: Database,
    search: SlaSearch,
    probes: list[JSONObject],
    *,
    status: str | None = None,
    answer: JSONObject | None = None,
    error: str | None = None,
) -> bool:
    """Write new probes (and status, answer, error) at ``search.version``; False when another caller won."""
    values: ColumnValues = {"probes_json": dumps(probes), "updated_at": now_utc(), "version": search.version + 1}
    if status is not None:
        values["status"] = status
    if answer is not None:
        values["answer_json"] = dumps(answer, sort_keys=True)
    if error is not None:
        values["error"] = error[:4000]
    with db.session() as s:
        result = s.execute(
            update(SlaSearchRow)
            .where(SlaSearchRow.id == search.id, SlaSearchRow.version == search.version)
            .values(**values)
        )
        return result.rowcount == 1


def queue_probe(
    db: Database,
    search: SlaSearch,
    probes: list[JSONObject],
    spec: JobSpec,
    probe: JSONObject,
    *,
    sweep: str,
    timeout_s: float,
) -> int | None:
    """Queue ``spec`` as the job of ``probe`` (appended to ``probes`` with its job id), in one
    transaction at ``search.version``; the job id, or None when another caller won."""
    rows = new_job_rows([spec], sweep=sweep, timeout_s=timeout_s, submitted_by=search.submitted_by)
    with db.session() as s:
        s.add_all(rows)
        s.flush()
        job_id = rows[0].id
        values = {
            "probes_json": dumps([*probes, {**probe, "job_id": job_id}]),
            "updated_at": now_utc(),
            "version": search.version + 1,
        }
        result = s.execute(
            update(SlaSearchRow)
            .where(SlaSearchRow.id == search.id, SlaSearchRow.version == search.version, SlaSearchRow.status == RUNNING)
            .values(**values)
        )
        if result.rowcount != 1:
            s.rollback()  # the job row goes with it
            return None
        return job_id


def stop(db: Database, name: str) -> SlaSearch | None:
    """Stop a running search (its queued probe job keeps running; no new probe is queued)."""
    with db.session() as s:
        row = s.scalars(select(SlaSearchRow).where(SlaSearchRow.name == name)).first()
        if row is None:
            return None
        if row.status == RUNNING:
            row.status, row.updated_at, row.version = STOPPED, now_utc(), int(row.version or 0) + 1
            s.flush()
        return _search(row)
