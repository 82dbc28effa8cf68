"""Façade for sweeps: the sweep names among the stored runs, and the runs grouped under one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from storage.db import Database
from storage.job_records import aware
from storage.models import RunRow
from storage.runs import RunDetail, get_run

MAX_SWEEP_RUNS = 500  # a load curve of more points than this is cut to the newest ones


@dataclass(frozen=True)
class SweepInfo:
    """One sweep name: how many runs it holds (done ones apart) and when its newest was stored."""

    name: str
    runs: int
    done: int
    newest: datetime


def list_sweeps(db: Database, limit: int = 200) -> list[SweepInfo]:
    """Every sweep name among the stored runs, newest sweep first."""
    done = func.sum((RunRow.status == "done").cast(RunRow.id.type))
    stmt = (
        select(RunRow.sweep, func.count(RunRow.id), done, func.max(RunRow.created_at))
        .where(RunRow.sweep.is_not(None))
        .group_by(RunRow.sweep)
        .order_by(func.max(RunRow.id).desc())
        .limit(limit)
    )
    with db.session() as s:
        rows = s.execute(stmt).all()
    return [SweepInfo(name, int(n), int(d or 0), aware(newest)) for name, n, d, newest in rows]


def sweep_runs(db: Database, name: str, limit: int = MAX_SWEEP_RUNS) -> list[RunDetail]:
    """The runs stored under sweep ``name`` (with spec and metrics), oldest first."""
    stmt = select(RunRow.id).where(RunRow.sweep == name).order_by(RunRow.id.desc()).limit(limit)
    with db.session() as s:
        ids = sorted(s.scalars(stmt))
    return [run for run in (get_run(db, i) for i in ids) if run is not None]
