"""ORM tables (SQLAlchemy 2.0 typed declarative). Only storage/ imports this module."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    """One finished benchmark run (done or failed); written in one transaction."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    name: Mapped[str | None] = mapped_column(String(200))
    sweep: Mapped[str | None] = mapped_column(String(200), index=True)
    fingerprint: Mapped[str] = mapped_column(String(32), index=True)
    spec_json: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(500), index=True)
    engine: Mapped[str] = mapped_column(String(50), index=True)
    device: Mapped[str] = mapped_column(String(50))
    device_name: Mapped[str | None] = mapped_column(String(200))
    provenance_json: Mapped[str] = mapped_column(Text, default="{}")
    metrics_json: Mapped[str | None] = mapped_column(Text)
    quality_json: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)

    requests: Mapped[list[RequestRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="RequestRow.idx"
    )


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
    error: Mapped[str | None] = mapped_column(Text)

    run: Mapped[RunRow] = relationship(back_populates="requests")


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
    progress_note: Mapped[str | None] = mapped_column(String(500))
    eta_s: Mapped[float | None] = mapped_column(Float)
    measuring_started: Mapped[bool] = mapped_column(Boolean, default=False)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    log_tail: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)


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
