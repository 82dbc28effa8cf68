"""Façade for benchmark runs: store one atomically, list, read back as dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select

from engine.measure.records import RequestRecord
from storage.db import Database
from storage.models import RequestRow, RunRow


@dataclass
class NewRun:
    """Everything a finished (or failed) run stores, written in one transaction."""

    status: str  # "done" | "failed"
    spec: dict[str, Any]
    fingerprint: str
    model: str
    engine: str
    device: str
    device_name: str | None = None
    name: str | None = None
    sweep: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] | None = None
    quality: dict[str, Any] | None = None
    error: str | None = None
    job_id: int | None = None
    requests: list[RequestRecord] = field(default_factory=list)


@dataclass(frozen=True)
class RunSummary:
    """A run as listed: identity, recipe and headline numbers."""

    id: int
    created_at: datetime
    status: str
    name: str | None
    sweep: str | None
    model: str
    engine: str
    device: str
    device_name: str | None
    fingerprint: str
    error: str | None
    metrics: dict[str, Any] | None
    quality: dict[str, Any] | None
    job_id: int | None


@dataclass(frozen=True)
class RunDetail(RunSummary):
    """A run with its full spec and provenance."""

    spec: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _summary_fields(row: RunRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "created_at": row.created_at,
        "status": row.status,
        "name": row.name,
        "sweep": row.sweep,
        "model": row.model,
        "engine": row.engine,
        "device": row.device,
        "device_name": row.device_name,
        "fingerprint": row.fingerprint,
        "error": row.error,
        "metrics": _loads(row.metrics_json),
        "quality": _loads(row.quality_json),
        "job_id": row.job_id,
    }


def save_run(db: Database, run: NewRun) -> int:
    """Insert a run with all its requests' raw stamps; returns the new run id."""
    row = RunRow(
        created_at=datetime.now(UTC),
        status=run.status,
        name=run.name,
        sweep=run.sweep,
        fingerprint=run.fingerprint,
        spec_json=json.dumps(run.spec, sort_keys=True),
        model=run.model,
        engine=run.engine,
        device=run.device,
        device_name=run.device_name,
        provenance_json=json.dumps(run.provenance, sort_keys=True, default=str),
        metrics_json=None if run.metrics is None else json.dumps(run.metrics),
        quality_json=None if run.quality is None else json.dumps(run.quality),
        error=run.error,
        job_id=run.job_id,
    )
    row.requests = [
        RequestRow(
            idx=r.index,
            warmup=r.warmup,
            arrival_ns=r.arrival_ns,
            send_ns=r.send_ns,
            prompt_tokens=r.prompt_tokens,
            output_tokens=r.output_tokens,
            chunk_ns_json=json.dumps(r.chunk_ns),
            chunk_tokens_json=json.dumps(r.chunk_tokens),
            error=r.error,
        )
        for r in run.requests
    ]
    with db.session() as s:
        s.add(row)
        s.flush()
        return row.id


def list_runs(db: Database, limit: int = 200, offset: int = 0, status: str | None = None) -> list[RunSummary]:
    """Newest first."""
    stmt = select(RunRow).order_by(RunRow.id.desc()).limit(limit).offset(offset)
    if status:
        stmt = stmt.where(RunRow.status == status)
    with db.session() as s:
        return [RunSummary(**_summary_fields(row)) for row in s.scalars(stmt)]


def count_runs(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count(RunRow.id))) or 0)


def get_run(db: Database, run_id: int) -> RunDetail | None:
    with db.session() as s:
        row = s.get(RunRow, run_id)
        if row is None:
            return None
        return RunDetail(
            **_summary_fields(row),
            spec=json.loads(row.spec_json),
            provenance=json.loads(row.provenance_json or "{}"),
        )


def get_requests(db: Database, run_id: int) -> list[RequestRecord]:
    """The raw per-request stamps of a run, in request order."""
    stmt = select(RequestRow).where(RequestRow.run_id == run_id).order_by(RequestRow.idx)
    with db.session() as s:
        return [
            RequestRecord(
                index=r.idx,
                arrival_ns=r.arrival_ns,
                send_ns=r.send_ns,
                prompt_tokens=r.prompt_tokens,
                chunk_ns=json.loads(r.chunk_ns_json),
                chunk_tokens=json.loads(r.chunk_tokens_json),
                error=r.error,
                warmup=r.warmup,
            )
            for r in s.scalars(stmt)
        ]


def delete_run(db: Database, run_id: int) -> bool:
    with db.session() as s:
        s.execute(delete(RequestRow).where(RequestRow.run_id == run_id))
        result = s.execute(delete(RunRow).where(RunRow.id == run_id))
        return bool(result.rowcount)


def runs_token(db: Database) -> tuple[int, int]:
    """A cheap "runs changed" token: (number of runs, highest id); caches key on it."""
    with db.session() as s:
        count, top = s.execute(select(func.count(RunRow.id), func.max(RunRow.id))).one()
        return int(count or 0), int(top or 0)
