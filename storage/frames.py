"""Runs as pandas DataFrames for tables and charts (one row per run, flat columns).

Read from the headline columns (storage/columns.py): filters, sorting and paging are SQL
(:class:`RunQuery`), and 100,000 runs make a frame in well under a second. Measured runs only unless
the query asks for predicted ones too (``RunQuery.predicted``; the ``predicted`` column says which). A figure the
registry shows in Explore without a column of its own (one declared since the schema was
written) is read from each run's metrics and quality JSON instead: slower on many runs, so a
figure Explore lists often gets a column (and an Alembic revision). Recipe and workload columns come from ``knobs_json`` (what differs from
the defaults, shared by the runs of one recipe and expanded once per distinct text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any, TypeVarTuple, cast

import numpy as np
import pandas as pd
from sqlalchemy import String, case, func, or_, select, type_coerce

from engine.measure import registry
from storage.columns import expand_knobs
from storage.db import Database
from storage.jsontext import loads, skip_warning
from storage.models import RunRow
from storage.runs import which_runs

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.orm import InstrumentedAttribute

    from engine.jsonvalue import JSONObject
    from storage.columns import Knobs

BASE = ("run_id", "created_at", "status", "name", "sweep", "model", "engine", "device", "device_name", "error")
_BASE_COLUMNS = ("id", *BASE[1:])
EXTRAS = ("completed", "failed", "noise", "contended", "predicted")
FILTERABLE = ("model", "engine", "device", "status", "sweep")
_Ts = TypeVarTuple("_Ts")  # a statement's column types
Columns = dict[str, list[Any]]  # the rows of a query read column-wise: one list of SQL values per column name


@dataclass(frozen=True)
class RunQuery:
    """Which runs, in what order, which page: every part is applied in SQL.

    ``sort`` is ``"created_at"`` / ``"id"`` or a metric key (``ttft_ms_p50``, ``quality.perplexity``);
    ``text`` matches the name, model, recipe knobs, sweep and failure reason (case-insensitive).
    """

    model: tuple[str, ...] = ()
    engine: tuple[str, ...] = ()
    device: tuple[str, ...] = ()
    status: tuple[str, ...] = ()
    sweep: tuple[str, ...] = ()
    run_ids: tuple[int, ...] = ()
    since: date | None = None
    until: date | None = None
    text: str = ""
    quiet: bool = False  # leave out runs measured under contention (NULL: not recorded, kept)
    predicted: bool | None = False  # measured runs only (False), predicted only (True), both (None): storage.runs
    sort: str = "id"
    descending: bool = True
    limit: int | None = None
    offset: int = 0


def _metric_attrs() -> dict[str, InstrumentedAttribute[float | None]]:
    """Metric key -> its column attribute on RunRow (the registry's stored metrics)."""
    return {m.key: getattr(RunRow, m.column) for m in registry.stored_metrics()}


def _json_metrics() -> list[registry.Metric]:
    """Explore's figures without a column: read from the runs' JSON (asked each time: a later declaration counts)."""
    return [m for m in registry.shown_in("explore") if not m.stored_column]


def sortable() -> list[str]:
    """What :attr:`RunQuery.sort` accepts: ``created_at``, ``id`` and every stored metric key."""
    return ["created_at", "id", *_metric_attrs()]


def _where(stmt: Select[*_Ts], q: RunQuery) -> Select[*_Ts]:
    stmt = which_runs(stmt, q.predicted)
    for name in FILTERABLE:
        values = getattr(q, name)
        if values:
            stmt = stmt.where(getattr(RunRow, name).in_(values))
    if q.run_ids:
        stmt = stmt.where(RunRow.id.in_(q.run_ids))
    if q.since:
        stmt = stmt.where(RunRow.created_at >= datetime.combine(q.since, time(), UTC))
    if q.until:
        stmt = stmt.where(RunRow.created_at < datetime.combine(q.until + timedelta(days=1), time(), UTC))
    if q.quiet:
        stmt = stmt.where(or_(RunRow.contended.is_(None), RunRow.contended.is_(False)))
    words = q.text.strip().lower()
    if words:
        pattern = f"%{words.replace('%', '').replace('_', '')}%"
        fields = (RunRow.name, RunRow.model, RunRow.knobs_json, RunRow.sweep, RunRow.error, RunRow.device_name)
        stmt = stmt.where(or_(*(func.lower(f).like(pattern) for f in fields)))
    return stmt


def _order(stmt: Select[*_Ts], q: RunQuery) -> Select[*_Ts]:
    column = {"created_at": RunRow.created_at, "id": RunRow.id, **_metric_attrs()}.get(q.sort, RunRow.id)
    if column is RunRow.id:
        return stmt.order_by(RunRow.id.desc() if q.descending else RunRow.id.asc())
    ordered = column.desc() if q.descending else column.asc()
    return stmt.order_by(column.is_(None), ordered, RunRow.id.desc())  # runs without the value last


def count(db: Database, query: RunQuery | None = None) -> int:
    """How many runs match ``query`` (its sort and page ignored)."""
    with db.session() as s:
        return int(s.scalar(_where(select(func.count(RunRow.id)), query or RunQuery())) or 0)


def distinct_values(db: Database, column: str, status: str | None = None, predicted: bool | None = False) -> list[str]:
    """The distinct values of a filterable column (model, engine, device, status, sweep) among the measured
    runs (``predicted``: as :class:`RunQuery`), sorted.

    Read from the column's own index over every run, then the few values predicted runs hold checked one by one:
    a ``WHERE predicted`` beside the DISTINCT made SQLite walk the predicted index and every row (0.9 s at
    100,000 runs instead of 0.04)."""
    if column not in FILTERABLE:
        raise ValueError(f"{column!r} is not one of {', '.join(FILTERABLE)}")
    attr = getattr(RunRow, column)
    stmt = select(attr).where(attr.is_not(None)).distinct()
    if status:
        stmt = stmt.where(RunRow.status == status)
    with db.session() as s:
        values = set(s.scalars(stmt))
        if predicted is not None:
            held = set(s.scalars(stmt.where(RunRow.predicted.is_(True))))  # predicted runs are few
            other = select(RunRow.id).where(RunRow.predicted.is_(False))  # a measured run holding the value
            lone = {v for v in held if s.scalar(other.where(attr == v).limit(1)) is None}  # only predicted hold it
            values = held if predicted else values - lone
    return sorted(str(v) for v in values)


def _select(q: RunQuery, metric_keys: list[str], from_json: bool = False) -> Select[*tuple[Any, ...]]:
    attrs = _metric_attrs()
    json_columns = (RunRow.metrics_json, RunRow.quality_json) if from_json else ()
    stmt = select(
        RunRow.id,
        type_coerce(RunRow.created_at, String),  # raw text on SQLite: parsed column-wise below, not row by row
        *(getattr(RunRow, c) for c in _BASE_COLUMNS[2:]),
        *(getattr(RunRow, c) for c in EXTRAS),
        *(attrs[k] for k in metric_keys),
        RunRow.knobs_json,
        RunRow.tasks_json,
        case((RunRow.knobs_json.is_(None), RunRow.spec_json), else_=None).label("spec_json"),
        *json_columns,
    )
    stmt = _order(_where(stmt, q), q)
    if q.limit is not None:
        stmt = stmt.limit(q.limit)
    return stmt.offset(q.offset) if q.offset else stmt


def query_frame(
    db: Database, query: RunQuery | None = None, *, knobs: bool = False, metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    """The runs matching ``query`` (filtered, sorted and paged in SQL) as a frame.

    Columns: identity, the stored metrics by registry key (only ``metrics`` when given: fewer
    columns read faster), counts and noise, ``recipe.*`` and ``workload.*``, task scores with
    their ``:kind`` hints; ``knobs`` (with ``knobs=True``) holds each run's changes from the
    defaults, ``{"recipe": {...}, "workload": {...}}``.
    """
    q = query or RunQuery()
    known = list(_metric_attrs())
    metric_keys = known if metrics is None else [k for k in known if k in set(metrics)]
    from_json = [m for m in _json_metrics() if metrics is None or m.key in set(metrics)]
    with db.session() as s:
        rows = s.connection().execute(_select(q, metric_keys, bool(from_json))).all()
    if not rows:
        return pd.DataFrame()
    texts = ("knobs_json", "tasks_json", "spec_json", *(("metrics_json", "quality_json") if from_json else ()))
    names = [*BASE, *EXTRAS, *metric_keys, *texts]
    data: Columns = dict(zip(names, (list(c) for c in zip(*rows, strict=True)), strict=True))
    figures = {key: np.array(data[key], dtype=np.float64) for key in metric_keys}  # None -> NaN
    figures.update(_json_figures(from_json, data))
    frame = pd.DataFrame({**{k: v for k, v in data.items() if k not in texts}, **figures})  # figures in their place
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True, format="mixed")
    parts = _knob_columns(frame, data, knobs)
    tasks = _task_columns(frame, data["tasks_json"])
    return pd.concat([frame, *parts, tasks], axis=1)


def _json_figures(wanted: list[registry.Metric], data: Columns) -> dict[str, np.ndarray]:
    """Each wanted figure of every row, read from its metrics and quality JSON as its declaration says."""
    if not wanted:
        return {}
    values: dict[str, list[float | None]] = {m.key: [] for m in wanted}
    for run_id, metrics_text, quality_text in zip(
        data["run_id"], data["metrics_json"], data["quality_json"], strict=True
    ):
        try:
            metrics = loads(metrics_text) if isinstance(metrics_text, str) else {}
            quality = loads(quality_text) if isinstance(quality_text, str) else {}
        except ValueError as exc:
            skip_warning("metrics of run", run_id, exc)
            metrics, quality = {}, {}
        for m in wanted:
            values[m.key].append(
                m.value(metrics if isinstance(metrics, dict) else {}, quality if isinstance(quality, dict) else {})
            )
    return {k: np.array(v, dtype=np.float64) for k, v in values.items()}


def _knobs_of(engine: str, knobs_json: str | None, spec_json: str | None, run_id: int) -> Knobs:
    """A run's changes from the defaults: its stored ``knobs_json``, else (older rows) from its spec."""
    try:
        if isinstance(knobs_json, str):
            return cast("Knobs", loads(knobs_json))  # what storage.columns.changed_fields gave
        if isinstance(spec_json, str):
            from storage.columns import changed_fields

            return changed_fields(loads(spec_json), engine)
    except (ValueError, TypeError) as exc:
        skip_warning("run's recipe of run", run_id, exc)
    return {}


def _knob_columns(frame: pd.DataFrame, data: Columns, with_knobs: bool) -> list[pd.DataFrame]:
    """``recipe.*`` and ``workload.*`` columns, each distinct (engine, knobs) expanded once."""
    keys = list(zip(data["engine"], data["knobs_json"], data["spec_json"], strict=True))
    codes, uniques = pd.factorize(pd.Series(keys, dtype=object))
    recipes, workloads, changes = [], [], []
    for engine, knobs_json, spec_json in uniques:
        i = keys.index((engine, knobs_json, spec_json))
        knobs = _knobs_of(engine, knobs_json, spec_json, data["run_id"][i])
        recipe, workload = expand_knobs(knobs, engine)
        until = workload.get("until_metric")
        if isinstance(until, str):  # stored as tpot_ms.p50 before keys had one spelling
            workload["until_metric"] = registry.canonical(until)
        recipes.append({f"recipe.{k}": v for k, v in recipe.items()})
        workloads.append({f"workload.{k}": v for k, v in workload.items()})
        changes.append(knobs)
    out = []
    for table in (recipes, workloads):
        out.append(pd.DataFrame(table).iloc[codes].set_axis(frame.index))
    if with_knobs:
        out.append(pd.DataFrame({"knobs": [changes[c] for c in codes]}, index=frame.index))
    return out


def _task_columns(frame: pd.DataFrame, texts: list[str | None]) -> pd.DataFrame:
    """Task scores (``quality.task:NAME``) and their kind hints, from the few runs that have tasks."""
    rows: dict[int, JSONObject] = {}
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            continue
        try:
            rows[i] = cast("JSONObject", loads(text))
        except ValueError as exc:
            skip_warning("task scores of run", frame["run_id"].iat[i], exc)
    return (
        pd.DataFrame.from_dict(rows, orient="index").reindex(frame.index) if rows else pd.DataFrame(index=frame.index)
    )


def figure_records(db: Database, run_ids: Sequence[int]) -> dict[int, tuple[JSONObject, JSONObject]]:
    """Each run's stored (metrics, quality) dicts, for what the columns leave out (intervals, standard
    errors); unreadable ones are skipped with a warning. Read in chunks of ids."""
    out: dict[int, tuple[JSONObject, JSONObject]] = {}
    ids = [int(i) for i in dict.fromkeys(run_ids)]
    with db.session() as s:
        for start in range(0, len(ids), 900):
            stmt = select(RunRow.id, RunRow.metrics_json, RunRow.quality_json).where(
                RunRow.id.in_(ids[start : start + 900])
            )
            for run_id, metrics_text, quality_text in s.execute(stmt):
                try:
                    metrics = loads(metrics_text) if isinstance(metrics_text, str) else {}
                    quality = loads(quality_text) if isinstance(quality_text, str) else {}
                except ValueError as exc:
                    skip_warning("figures of run", run_id, exc)
                    continue
                out[int(run_id)] = (
                    metrics if isinstance(metrics, dict) else {},
                    quality if isinstance(quality, dict) else {},
                )
    return out


def runs_frame(db: Database, limit: int | None = None) -> pd.DataFrame:
    """All runs, newest first (at most ``limit``): identity, recipe knobs, workload and flat metrics."""
    return query_frame(db, RunQuery(limit=limit))


def runs_page(db: Database, query: RunQuery) -> tuple[pd.DataFrame, int]:
    """One page of runs for a table (with each run's ``knobs``) and how many match in all."""
    return query_frame(db, query, knobs=True), count(db, query)
