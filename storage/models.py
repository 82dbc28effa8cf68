"""ORM tables (SQLAlchemy 2.0 typed declarative). Only storage/ imports this module."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from engine.measure.registry import stored_metrics
from engine.secrets import scrub

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect


class ScrubbedText(TypeDecorator[str]):
    """Text that may quote a server or a log (errors, log tails, notes): every write, ORM or
    ``update()``, passes :func:`engine.secrets.scrub`, so no API key or bearer token is stored."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return scrub(value) if isinstance(value, str) else value


class ScrubbedString(ScrubbedText):
    """:class:`ScrubbedText` with a length (a VARCHAR column)."""

    impl = String
    cache_ok = True


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    """One finished benchmark run (done or failed); written in one transaction.

    Besides the JSON of its spec, metrics and quality, a run keeps its headline figures in
    columns (storage/columns.py; one per registry metric with ``stored_column``, added
    below the class), so listings page, filter and sort in SQL without parsing JSON.
    """

    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_fingerprint_status_id", "fingerprint", "status", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    name: Mapped[str | None] = mapped_column(String(200))
    sweep: Mapped[str | None] = mapped_column(String(200), index=True)
    fingerprint: Mapped[str] = mapped_column(String(32), index=True)
    spec_json: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(500), index=True)
    engine: Mapped[str] = mapped_column(String(50), index=True)
    device: Mapped[str] = mapped_column(String(50), index=True)
    device_name: Mapped[str | None] = mapped_column(String(200))
    provenance_json: Mapped[str] = mapped_column(ScrubbedText, default="{}")
    metrics_json: Mapped[str | None] = mapped_column(Text)
    quality_json: Mapped[str | None] = mapped_column(ScrubbedText)
    error: Mapped[str | None] = mapped_column(ScrubbedText)
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)
    submitted_by: Mapped[str | None] = mapped_column(String(200))  # its job's, or cli:<user>
    # Headline columns besides the metrics' (storage/columns.py).
    completed: Mapped[int | None] = mapped_column(Integer)
    failed: Mapped[int | None] = mapped_column(Integer)
    noise: Mapped[str | None] = mapped_column(Text)  # the noise flags in words; NULL: not recorded
    contended: Mapped[bool | None] = mapped_column(Boolean)
    knobs_json: Mapped[str | None] = mapped_column(Text)  # recipe knobs / workload fields off their defaults
    tasks_json: Mapped[str | None] = mapped_column(Text)  # task scores and their kinds; NULL: no tasks
    # Predicted by the serving simulator, not measured: listings leave these out unless asked (storage/runs.py).
    predicted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), index=True)

    requests: Mapped[list[RequestRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="RequestRow.idx"
    )
    series: Mapped[list[RunSeriesRow]] = relationship(back_populates="run", cascade="all, delete-orphan")


for _metric in stored_metrics():  # one nullable float column per stored metric (the registry's list)
    setattr(RunRow, _metric.column, mapped_column(_metric.column, Float, nullable=True))


class RequestRow(Base):
    """Raw stamps of one request: send time and every chunk's time and token count."""

    __tablename__ = "requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    warmup: Mapped[bool] = mapped_column(Boolean, default=False)
    trial: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # measured phase (0: the only one)
    arrival_ns: Mapped[int] = mapped_column(BigInteger)
    send_ns: Mapped[int] = mapped_column(BigInteger)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    chunk_ns_json: Mapped[str] = mapped_column(Text)
    chunk_tokens_json: Mapped[str] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(ScrubbedText)
    requested_output_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)  # its own max new tokens
    session: Mapped[int | None] = mapped_column(Integer, nullable=True)  # multi-turn traffic
    turn: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cancelled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # by the client, on purpose
    cached_prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)  # prefix-cache hits, as reported

    run: Mapped[RunRow] = relationship(back_populates="requests")


class RunSeriesRow(Base):
    """One time series (or other compact side record) of a run, by kind: device telemetry,
    a server's scraped metrics, a profile's operator table. Written with the run."""

    __tablename__ = "run_series"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    body_json: Mapped[str] = mapped_column(ScrubbedText)

    run: Mapped[RunRow] = relationship(back_populates="series")


class JobRow(Base):
    """A queued benchmark; claimed by at most one worker at a time."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(16), index=True)
    name: Mapped[str | None] = mapped_column(String(200))
    sweep: Mapped[str | None] = mapped_column(String(200), index=True)
    spec_json: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(50), index=True)
    timeout_s: Mapped[float] = mapped_column(Float, default=3600.0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker_id: Mapped[str | None] = mapped_column(String(200), index=True)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    phase: Mapped[str | None] = mapped_column(String(32))
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    progress_note: Mapped[str | None] = mapped_column(ScrubbedString(500))
    eta_s: Mapped[float | None] = mapped_column(Float)
    measuring_started: Mapped[bool] = mapped_column(Boolean, default=False)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    log_tail: Mapped[str | None] = mapped_column(ScrubbedText)
    run_id: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(ScrubbedText)
    # Who did what: an e-mail (signed in), local:<user> (the app without sign-in), cli:<user>.
    submitted_by: Mapped[str | None] = mapped_column(String(200))
    cancelled_by: Mapped[str | None] = mapped_column(String(200))
    deleted_by: Mapped[str | None] = mapped_column(String(200))  # who deleted the job's run


class WorkerRow(Base):
    """A live (or dead) worker process; its heartbeat tells the others it is alive."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    devices: Mapped[str] = mapped_column(String(500))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    stopped: Mapped[bool] = mapped_column(Boolean, default=False)


class HardwareMeasurementRow(Base):
    """One calibration micro-benchmark of a local device (copy bandwidth, matmul throughput)."""

    __tablename__ = "hardware_measurements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    host: Mapped[str] = mapped_column(String(200), index=True)
    device: Mapped[str] = mapped_column(String(50), index=True)
    device_name: Mapped[str] = mapped_column(String(200))
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    copy_gbs: Mapped[float] = mapped_column(Float)
    matmul_json: Mapped[str] = mapped_column(Text)
    threads: Mapped[int | None] = mapped_column(Integer)
    duration_s: Mapped[float] = mapped_column(Float)
    details_json: Mapped[str] = mapped_column(Text, default="{}")


class SuiteRow(Base):
    """A benchmark suite stored by name: its validated definition (entries and gates) as JSON."""

    __tablename__ = "suites"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    body_json: Mapped[str] = mapped_column(Text)
    source: Mapped[str | None] = mapped_column(String(1000))  # the file it was read from, if any
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SuiteJobRow(Base):
    """One job queued for a suite entry, with the tag it was queued under (names a baseline)."""

    __tablename__ = "suite_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    suite: Mapped[str] = mapped_column(String(200), index=True)
    entry: Mapped[str] = mapped_column(String(200))
    tag: Mapped[str | None] = mapped_column(String(200), index=True)
    fingerprint: Mapped[str] = mapped_column(String(32))
    job_id: Mapped[int] = mapped_column(Integer, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SuiteScheduleRow(Base):
    """A suite queued on a cron schedule; ``last_due_ts`` is the due time last claimed (epoch s)."""

    __tablename__ = "suite_schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    suite: Mapped[str] = mapped_column(String(200), unique=True)
    file: Mapped[str | None] = mapped_column(String(1000))
    cron: Mapped[str] = mapped_column(String(200))
    tag: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    since_ts: Mapped[int] = mapped_column(BigInteger)  # due times at or before this are never queued
    last_due_ts: Mapped[int | None] = mapped_column(BigInteger)
    last_queued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_job_ids: Mapped[str | None] = mapped_column(Text)  # JSON list of the jobs queued last time


class StudyRow(Base):
    """A recipe study: its validated definition, status and who created it. Optuna's own tables
    (``studies``, ``trials`` ...) sit beside it in the same database under ``optuna_name``."""

    __tablename__ = "recipe_studies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    optuna_name: Mapped[str] = mapped_column(String(200), unique=True)
    definition_json: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True)  # running | paused | stopped | done
    note: Mapped[str | None] = mapped_column(ScrubbedText)  # why it ended, or the last error
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    submitted_by: Mapped[str | None] = mapped_column(String(200))
    lock_owner: Mapped[str | None] = mapped_column(String(200))  # who advances it now (one at a time)
    lock_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class StudyTrialRow(Base):
    """One trial of a study: its recipe, the job and run measuring it, what was measured and predicted."""

    __tablename__ = "recipe_study_trials"
    __table_args__ = (UniqueConstraint("study_id", "number", name="uq_recipe_study_trials_number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("recipe_studies.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # Optuna's trial number
    status: Mapped[str] = mapped_column(String(16))  # pending | complete | failed | pruned | duplicate
    params_json: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str | None] = mapped_column(String(32))
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)
    run_id: Mapped[int | None] = mapped_column(Integer)
    reused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    values_json: Mapped[str | None] = mapped_column(Text)
    measured_json: Mapped[str | None] = mapped_column(Text)
    constraints_json: Mapped[str | None] = mapped_column(Text)
    feasible: Mapped[bool | None] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(ScrubbedText)
    predicted_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SlaSearchRow(Base):
    """An SLA finder search (engine/optimize/sla.py): its definition, probes so far and answer.

    ``version`` rises with every change; a change is written only at the version it read,
    so two callers advancing the same search (workers, ``sla --wait``) never queue a probe twice.
    """

    __tablename__ = "sla_searches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    definition_json: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True)
    probes_json: Mapped[str] = mapped_column(Text, default="[]")
    answer_json: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(ScrubbedText)
    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    submitted_by: Mapped[str | None] = mapped_column(String(200))
