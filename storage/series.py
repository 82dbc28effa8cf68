"""Façade for a run's side records by kind (device telemetry, server metrics, profiles).

They are written with the run, in its transaction (``NewRun.series``); this module reads them
back. A record that cannot be read (bad JSON written by hand) reads as absent, with a warning.
The one record written later is what a sweep decided after the run (``sweep_stop``: the sweep
stopped at this run's load, and the points it did not run), by :func:`add_series`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from storage.db import Database
from storage.jsontext import dumps, loads, skip_warning
from storage.models import RunSeriesRow

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject


def get_series(db: Database, run_id: int, kind: str) -> JSONObject | None:
    """The run's record of this kind, or None when it has none."""
    stmt = select(RunSeriesRow).where(RunSeriesRow.run_id == run_id, RunSeriesRow.kind == kind)
    with db.session() as s:
        row = s.scalars(stmt.order_by(RunSeriesRow.id)).first()
        if row is None:
            return None
        try:
            body = loads(row.body_json)
        except ValueError as exc:
            skip_warning("run_series", row.id, exc)
            return None
        return body if isinstance(body, dict) else None


def series_kinds(db: Database, run_id: int) -> list[str]:
    """The kinds of side record stored for a run, sorted."""
    stmt = select(RunSeriesRow.kind).where(RunSeriesRow.run_id == run_id).distinct()
    with db.session() as s:
        return sorted(s.scalars(stmt))


def series_by_run(db: Database, run_ids: list[int], kind: str) -> dict[int, JSONObject]:
    """The record of this kind of each run that has one (one query), by run id."""
    if not run_ids:
        return {}
    stmt = select(RunSeriesRow).where(RunSeriesRow.run_id.in_(run_ids), RunSeriesRow.kind == kind)
    out: dict[int, JSONObject] = {}
    with db.session() as s:
        for row in s.scalars(stmt.order_by(RunSeriesRow.id)):
            try:
                body = loads(row.body_json)
            except ValueError as exc:
                skip_warning("run_series", row.id, exc)
                continue
            if isinstance(body, dict):
                out.setdefault(row.run_id, body)
    return out


def add_series(db: Database, run_id: int, kind: str, body: JSONObject) -> None:
    """Add a side record to a stored run (strict JSON), e.g. what its sweep decided after it ran."""
    with db.session() as s:
        s.add(RunSeriesRow(run_id=run_id, kind=kind[:32], body_json=dumps(body)))
