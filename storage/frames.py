"""Runs as pandas DataFrames for tables and charts (one row per run, flat columns)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from sqlalchemy import select

from engine.metrics import LATENCY_GROUPS
from storage.db import Database
from storage.models import RunRow

STAT_KEYS: tuple[str, ...] = ("mean", "p50", "p90", "p95", "p99")
SCALAR_KEYS: tuple[str, ...] = (
    "output_tokens_per_s", "requests_per_s", "tokens_per_s_per_user", "goodput_requests_per_s",
    "peak_memory_bytes", "load_s", "completed", "failed",
)


def flatten_metrics(metrics: dict[str, Any] | None) -> dict[str, Any]:
    """``{"ttft_ms": {"p50": 1}}`` -> ``{"ttft_ms_p50": 1}`` plus the scalars."""
    metrics = metrics or {}
    flat: dict[str, Any] = {}
    for group in LATENCY_GROUPS:
        stats = metrics.get(group) or {}
        for key in STAT_KEYS:
            flat[f"{group}_{key}"] = stats.get(key)
    for key in SCALAR_KEYS:
        flat[key] = metrics.get(key)
    return flat


def runs_frame(db: Database, limit: int | None = None) -> pd.DataFrame:
    """All runs (newest first) with identity columns, recipe knobs and flat metrics."""
    stmt = select(
        RunRow.id, RunRow.created_at, RunRow.status, RunRow.name, RunRow.sweep, RunRow.model,
        RunRow.engine, RunRow.device, RunRow.device_name, RunRow.spec_json, RunRow.metrics_json,
        RunRow.quality_json, RunRow.error,
    ).order_by(RunRow.id.desc())
    if limit:
        stmt = stmt.limit(limit)
    rows = []
    with db.session() as s:
        for r in s.execute(stmt):
            spec = json.loads(r.spec_json)
            recipe = spec.get("recipe") or {}
            workload = spec.get("workload") or {}
            row: dict[str, Any] = {
                "run_id": r.id, "created_at": r.created_at, "status": r.status, "name": r.name,
                "sweep": r.sweep, "model": r.model, "engine": r.engine, "device": r.device,
                "device_name": r.device_name, "error": r.error,
            }
            row.update({f"recipe.{k}": v for k, v in recipe.items() if k != "engine"})
            row.update({f"workload.{k}": v for k, v in workload.items()})
            row.update(flatten_metrics(json.loads(r.metrics_json) if r.metrics_json else None))
            quality = json.loads(r.quality_json) if r.quality_json else {}
            row.update({f"quality.{k}": v for k, v in quality.items() if isinstance(v, (int, float))})
            rows.append(row)
    return pd.DataFrame(rows)
