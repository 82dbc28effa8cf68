"""Façade for benchmark runs: store one atomically, list, read back as dataclasses.

Everything is written as strict JSON (storage/jsontext.py); a row that cannot be read
back (written before that rule, or by hand) is left out of every listing with a warning
naming its id, so one bad row never takes a page down.

A run stored by a job's process names the job and its worker (``NewRun.worker_id``): it
is stored only while that worker still holds the job, in the same transaction that links
the job to the run; otherwise :class:`~storage.db.ClaimLost` is raised and nothing is
stored (a late result after recovery never leaves an orphan run).

A run may be **predicted** (``NewRun.predicted``: the serving simulator's, never measured). Listings
take ``predicted``: ``False`` (the default) lists measured runs only, ``True`` predicted ones only,
``None`` both; so every page, front, history, gate and calibration that lists runs stays measured
unless it asks. A run fetched by its id (:func:`get_run`, :func:`get_runs`) is returned either way,
with ``predicted`` set, for its page and links.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypedDict, TypeVar, TypeVarTuple, cast

from sqlalchemy import delete, func, insert, select, update

from engine.measure.records import RequestRecord
from engine.settings import cli_actor
from storage.columns import column_values
from storage.db import ClaimLost, Database
from storage.jsontext import dumps, dumps_numbers, loads, loads_object, loads_object_or_none, skip_warning
from storage.models import JobRow, RequestRow, RunRow, RunSeriesRow

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.orm import Session

    from engine.jsonvalue import JSONObject

_LOG = logging.getLogger(__name__)
_T = TypeVar("_T")
RequestValues = dict[str, int | str | None]  # one request's column values (a bool is an int)


@dataclass
class NewRun:
    """Everything a finished (or failed) run stores, written in one transaction."""

    status: str  # "done" | "failed"
    spec: JSONObject
    fingerprint: str
    model: str
    engine: str
    device: str
    device_name: str | None = None
    name: str | None = None
    sweep: str | None = None
    provenance: JSONObject = field(default_factory=dict)  # a value that is not JSON is stored as its str()
    metrics: JSONObject | None = None
    quality: JSONObject | None = None
    error: str | None = None
    job_id: int | None = None
    requests: list[RequestRecord] = field(default_factory=list)
    worker_id: str | None = None  # with job_id: store only while this worker holds the job
    submitted_by: str | None = None  # a job's run inherits its job's; a run without a job is the CLI's
    # Side records by kind ("telemetry", "server_metrics", "profile", ...): strict-JSON dicts, read
    # back with storage.series.get_series.
    series: dict[str, JSONObject] = field(default_factory=dict)
    # Predicted by the serving simulator (engine/whatif/predict), not measured: its provenance's ``prediction``
    # names the hardware, tensor parallelism, calibration label and band.
    predicted: bool = False


Predicted = bool | None  # which runs a listing holds: False measured only (default), True predicted only, None both
_Ts = TypeVarTuple("_Ts")  # a statement's column types


def which_runs(stmt: Select[*_Ts], predicted: Predicted) -> Select[*_Ts]:
    """``stmt`` restricted to measured runs (``False``), predicted ones (``True``) or left as is (``None``)."""
    return stmt if predicted is None else stmt.where(RunRow.predicted.is_(bool(predicted)))


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
    metrics: JSONObject | None
    quality: JSONObject | None
    job_id: int | None
    submitted_by: str | None
    predicted: bool = False


@dataclass(frozen=True)
class RunDetail(RunSummary):
    """A run with its full spec and provenance."""

    spec: JSONObject = field(default_factory=dict)
    provenance: JSONObject = field(default_factory=dict)


class _SummaryFields(TypedDict):
    """:class:`RunSummary`'s fields, as read from a row (a :class:`RunDetail` adds its spec and provenance)."""

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
    metrics: JSONObject | None
    quality: JSONObject | None
    job_id: int | None
    submitted_by: str | None


def _summary_fields(row: RunRow) -> _SummaryFields:
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
        "metrics": loads_object_or_none(row.metrics_json),
        "quality": loads_object_or_none(row.quality_json),
        "job_id": row.job_id,
        "submitted_by": row.submitted_by,
        "predicted": bool(row.predicted),
    }


def request_values(r: RequestRecord) -> RequestValues:
    """One request's row values (every column of ``requests`` but its ids): the one place they are listed,
    for the rows attached by :func:`run_row` and the bulk insert of :func:`save_run` alike."""
    return {
        "idx": r.index,
        "warmup": r.warmup,
        "trial": r.trial,
        "arrival_ns": r.arrival_ns,
        "send_ns": r.send_ns,
        "prompt_tokens": r.prompt_tokens,
        "output_tokens": r.output_tokens,
        "chunk_ns_json": dumps_numbers(r.chunk_ns),
        "chunk_tokens_json": dumps_numbers(r.chunk_tokens),
        "error": r.error,
        "requested_output_tokens": r.requested_output_tokens,
        "session": r.session,
        "turn": r.turn,
        "cancelled": r.cancelled,
        "cached_prompt_tokens": r.cached_prompt_tokens,
    }


def run_row(run: NewRun, with_requests: bool = True) -> RunRow:
    """The rows of one run (its requests attached unless ``with_requests`` is False), ready to add to a
    session; strict JSON only."""
    row = RunRow(
        created_at=datetime.now(UTC),
        status=run.status,
        name=run.name,
        sweep=run.sweep,
        fingerprint=run.fingerprint,
        spec_json=dumps(run.spec, sort_keys=True),
        model=run.model,
        engine=run.engine,
        device=run.device,
        device_name=run.device_name,
        provenance_json=dumps(run.provenance, sort_keys=True, default=str),
        metrics_json=None if run.metrics is None else dumps(run.metrics),
        quality_json=None if run.quality is None else dumps(run.quality),
        error=run.error,
        job_id=run.job_id,
        submitted_by=run.submitted_by,
        predicted=run.predicted,
    )
    # the headline columns, from the same values as the JSON (read back, so non-finite numbers are NULL there too)
    spec, metrics, quality = (
        None if text is None else loads(text) for text in (row.spec_json, row.metrics_json, row.quality_json)
    )
    for column, value in column_values(spec, metrics, quality, run.engine).items():
        setattr(row, column, value)
    if with_requests:
        row.requests = [RequestRow(**request_values(r)) for r in run.requests]
    row.series = [RunSeriesRow(kind=kind, body_json=dumps(body)) for kind, body in sorted(run.series.items())]
    return row


def save_run(db: Database, run: NewRun) -> int:
    """Insert a run with all its requests' raw stamps; returns the new run id.

    With ``job_id`` and ``worker_id`` set, the run is stored only while that worker still
    holds the job (and the job is linked to it in the same transaction); else ClaimLost.
    The run records who launched it: its job's ``submitted_by``; a run without a job is
    stored only by ``python -m engine run``/``sweep``, so by ``cli:<OS user>``.
    The requests go in one bulk insert (:func:`request_values` rows, no ORM object per request):
    10,000 requests of 32 stamps in a fraction of a second. A predicted run (``predicted``) must name its
    prediction in its provenance (hardware key, tensor parallelism, calibration label and band): ValueError.
    """
    if run.predicted and not (run.provenance or {}).get("prediction"):
        raise ValueError("a predicted run names its prediction (provenance['prediction']: hardware, TP, calibration)")
    row = run_row(run, with_requests=False)
    with db.session() as s:
        if row.submitted_by is None:
            row.submitted_by = _launched_by(s, run.job_id)
        s.add(row)
        s.flush()
        if run.requests:
            s.execute(insert(RequestRow.__table__), [{**request_values(r), "run_id": row.id} for r in run.requests])
        if run.job_id is not None and run.worker_id is not None:
            _link_to_claimed_job(s, run.job_id, run.worker_id, row.id)
        return row.id


def _launched_by(s: Session, job_id: int | None) -> str | None:
    """Who launched a run: its job's submitter, else (no job: the CLI) ``cli:<user>``."""
    if job_id is None:
        return cli_actor()
    return s.scalar(select(JobRow.submitted_by).where(JobRow.id == job_id))


def _link_to_claimed_job(s: Session, job_id: int, worker_id: str, run_id: int) -> None:
    """Point the job at its run, if ``worker_id`` still runs it; else ClaimLost (the caller rolls back)."""
    result = s.execute(
        update(JobRow)
        .where(JobRow.id == job_id, JobRow.status == "running", JobRow.worker_id == worker_id)
        .values(run_id=run_id)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise ClaimLost(f"job {job_id} is no longer held by worker {worker_id}; its result was not stored")


def _readable(rows: Iterable[RunRow], make: Callable[[RunRow], _T]) -> list[_T]:
    """``make(row)`` for every row whose JSON can be read; the others are skipped with a warning."""
    out = []
    for row in rows:
        try:
            out.append(make(row))
        except (ValueError, TypeError) as exc:
            skip_warning("run", row.id, exc)
    return out


def list_runs(
    db: Database, limit: int = 200, offset: int = 0, status: str | None = None, predicted: Predicted = False
) -> list[RunSummary]:
    """Newest first, measured runs only unless ``predicted`` says (module doc); a run whose stored JSON cannot
    be read is skipped (with a warning)."""
    stmt = which_runs(select(RunRow).order_by(RunRow.id.desc()).limit(limit).offset(offset), predicted)
    if status:
        stmt = stmt.where(RunRow.status == status)
    with db.session() as s:
        return _readable(s.scalars(stmt), lambda row: RunSummary(**_summary_fields(row)))


def count_runs(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count(RunRow.id))) or 0)


def _detail(row: RunRow) -> RunDetail:
    fields = _summary_fields(row)  # read first, as before: an unreadable row names the same column
    return RunDetail(**fields, spec=loads_object(row.spec_json), provenance=loads_object(row.provenance_json or "{}"))


def get_run(db: Database, run_id: int) -> RunDetail | None:
    """One run, or None when there is none (or its stored JSON cannot be read: warned)."""
    with db.session() as s:
        row = s.get(RunRow, run_id)
        if row is None:
            return None
        found = _readable([row], _detail)
        return found[0] if found else None


def unreadable_reason(db: Database, run_id: int) -> str | None:
    """Why a stored run cannot be read (its JSON is damaged), in one line; None when it reads or is not stored.

    For pages that found no run with :func:`get_run`: "stored but unreadable" is not "deleted"."""
    with db.session() as s:
        row = s.get(RunRow, run_id)
        if row is None:
            return None
        try:
            _detail(row)
        except (ValueError, TypeError) as exc:
            return f"its stored record cannot be read ({' '.join(str(exc).split())[:160]})"
    return None


def get_runs(db: Database, run_ids: list[int]) -> list[RunDetail]:
    """Several runs in one query, in id order; missing or unreadable ones (warned) are left out."""
    if not run_ids:
        return []
    with db.session() as s:
        rows = s.scalars(select(RunRow).where(RunRow.id.in_(run_ids)).order_by(RunRow.id))
        return _readable(rows, _detail)


def get_requests(db: Database, run_id: int) -> list[RequestRecord]:
    """The raw per-request stamps of a run, in request order (read as plain rows: no ORM object per request)."""
    t = RequestRow.__table__.c
    stmt = (
        select(t.idx, t.arrival_ns, t.send_ns, t.prompt_tokens, t.chunk_ns_json, t.chunk_tokens_json)
        .add_columns(t.error, t.warmup, t.trial, t.requested_output_tokens, t.session, t.turn, t.cancelled)
        .add_columns(t.cached_prompt_tokens)
        .where(t.run_id == run_id)
        .order_by(t.idx)
    )
    with db.session() as s:
        return [
            RequestRecord(
                index=idx,
                arrival_ns=arrival_ns,
                send_ns=send_ns,
                prompt_tokens=prompt_tokens,
                chunk_ns=cast("list[int]", loads(chunk_ns)),
                chunk_tokens=cast("list[int]", loads(chunk_tokens)),
                error=error,
                warmup=bool(warmup),
                trial=trial or 0,
                requested_output_tokens=requested,
                session=session,
                turn=turn,
                cancelled=bool(cancelled),
                cached_prompt_tokens=cached,
            )
            for (
                idx,
                arrival_ns,
                send_ns,
                prompt_tokens,
                chunk_ns,
                chunk_tokens,
                error,
                warmup,
                trial,
                requested,
                session,
                turn,
                cancelled,
                cached,
            ) in s.execute(stmt)
        ]


def delete_run(db: Database, run_id: int, *, by: str | None = None) -> bool:
    """Delete a run and its raw stamps; its job (if any) keeps who deleted it (``deleted_by``)."""
    with db.session() as s:
        job_id = s.scalar(select(RunRow.job_id).where(RunRow.id == run_id))
        s.execute(delete(RequestRow).where(RequestRow.run_id == run_id))
        s.execute(delete(RunSeriesRow).where(RunSeriesRow.run_id == run_id))
        result = s.execute(delete(RunRow).where(RunRow.id == run_id))
        if result.rowcount and job_id is not None and by:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(deleted_by=by[:200]))
        if result.rowcount:
            _LOG.info("run %d deleted by %s", run_id, by or "unknown")
        return bool(result.rowcount)


def runs_token(db: Database) -> tuple[int, int]:
    """A cheap "runs changed" token: (number of runs, highest id); caches key on it."""
    with db.session() as s:
        count, top = s.execute(select(func.count(RunRow.id), func.max(RunRow.id))).one()
        return int(count or 0), int(top or 0)
