"""Façade for local-device calibration measurements (micro-benchmark results)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from sqlalchemy import select

from storage.db import Database
from storage.jsontext import dumps, loads, loads_object, skip_warning
from storage.models import HardwareMeasurementRow

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject


@dataclass(frozen=True)
class NewMeasurement:
    """A micro-benchmark result to store."""

    host: str
    device: str
    device_name: str
    copy_gbs: float
    matmul_tflops: dict[str, float]
    duration_s: float
    memory_bytes: int | None = None
    threads: int | None = None
    details: JSONObject = field(default_factory=dict)  # a value that is not JSON is stored as its str()


@dataclass(frozen=True)
class HardwareMeasurement(NewMeasurement):
    """A stored micro-benchmark result."""

    id: int = 0
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def _from_row(row: HardwareMeasurementRow) -> HardwareMeasurement:
    created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
    return HardwareMeasurement(
        id=row.id,
        created_at=created,
        host=row.host,
        device=row.device,
        device_name=row.device_name,
        copy_gbs=row.copy_gbs,
        matmul_tflops=cast("dict[str, float]", loads(row.matmul_json)),
        duration_s=row.duration_s,
        memory_bytes=row.memory_bytes,
        threads=row.threads,
        details=loads_object(row.details_json or "{}"),
    )


def save_measurement(db: Database, m: NewMeasurement) -> int:
    """Store one measurement; returns its id."""
    row = HardwareMeasurementRow(
        created_at=datetime.now(UTC),
        host=m.host,
        device=m.device,
        device_name=m.device_name,
        memory_bytes=m.memory_bytes,
        copy_gbs=m.copy_gbs,
        matmul_json=dumps(m.matmul_tflops),
        threads=m.threads,
        duration_s=m.duration_s,
        details_json=dumps(m.details, default=str),
    )
    with db.session() as s:
        s.add(row)
        s.flush()
        return row.id


def list_measurements(db: Database, device: str | None = None, limit: int = 100) -> list[HardwareMeasurement]:
    """Newest first, optionally for one device string (``cpu``, ``cuda:0``)."""
    stmt = select(HardwareMeasurementRow).order_by(HardwareMeasurementRow.id.desc()).limit(limit)
    if device:
        stmt = stmt.where(HardwareMeasurementRow.device == device)
    out = []
    with db.session() as s:
        for r in s.scalars(stmt):
            try:
                out.append(_from_row(r))
            except (ValueError, TypeError) as exc:
                skip_warning("hardware measurement", r.id, exc)
    return out


def latest_per_device(db: Database) -> list[HardwareMeasurement]:
    """The newest measurement of each device string (any host), newest first."""
    seen: dict[str, HardwareMeasurement] = {}
    for m in list_measurements(db, limit=500):
        seen.setdefault(m.device, m)
    return list(seen.values())
