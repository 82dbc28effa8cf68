"""Runs as pandas DataFrames for tables and charts (one row per run, flat columns)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import select

from engine.measure import registry
from engine.measure.registry import LATENCY_GROUPS, SCALARS
from storage.db import Database
from storage.jsontext import loads, skip_warning
from storage.models import RunRow

STAT_KEYS: tuple[str, ...] = ("mean", "p50", "p90", "p95", "p99")
SCALAR_KEYS: tuple[str, ...] = (*SCALARS, "completed", "failed")


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
    flat["error_rate"] = registry.error_rate(metrics) if metrics else None  # stored, else from the counts
    flags = metrics.get("noise_flags")  # engine/run/noise.py; None for runs from before it
    flat["noise"] = None if flags is None else "; ".join(f.get("detail", "") for f in flags)
    flat["contended"] = None if flags is None else any(f.get("kind") == "machine" for f in flags)
    return flat


def quality_columns(quality: dict[str, Any] | None) -> dict[str, Any]:
    """A quality dict's display columns: its accuracy metrics (registry), and each task's kind as a hint.

    Bookkeeping (window, stride, token counts, stderr companions) is left out; the
    ``quality.task:NAME:kind`` text column tells the registry a task's unit and direction.
    """
    columns: dict[str, Any] = dict(registry.quality_metrics(quality))
    columns.update({f"{key}:kind": kind for key, kind in registry.task_kinds(quality).items()})
    return columns


def _parsed_rows(rows: list[Any]) -> list[tuple[Any, tuple[dict, dict], Any, Any]]:
    """(row, (recipe, workload), metrics, quality) for each row whose JSON reads; others warned and skipped.

    Identical spec texts are parsed once (sweeps share most of theirs).
    """
    spec_parts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    out = []
    for r in rows:
        try:
            parts = spec_parts.get(r.spec_json)
            if parts is None:
                spec = loads(r.spec_json)
                parts = spec_parts[r.spec_json] = (spec.get("recipe") or {}, spec.get("workload") or {})
            metrics = loads(r.metrics_json) if r.metrics_json else None
            quality = loads(r.quality_json) if r.quality_json else None
            if metrics is not None and not isinstance(metrics, dict):
                raise ValueError("metrics are not an object")
        except (ValueError, TypeError, AttributeError) as exc:
            skip_warning("run", r.id, exc)
            continue
        out.append((r, parts, metrics, quality))
    return out


def _runs_query(limit: int | None) -> Any:
    """The columns a runs frame reads, newest first."""
    stmt = select(
        RunRow.id,
        RunRow.created_at,
        RunRow.status,
        RunRow.name,
        RunRow.sweep,
        RunRow.model,
        RunRow.engine,
        RunRow.device,
        RunRow.device_name,
        RunRow.spec_json,
        RunRow.metrics_json,
        RunRow.quality_json,
        RunRow.error,
    ).order_by(RunRow.id.desc())
    return stmt.limit(limit) if limit else stmt


def runs_frame(db: Database, limit: int | None = None) -> pd.DataFrame:
    """All runs (newest first) with identity columns, recipe knobs and flat metrics.

    Built column by column (one list per column) and with identical spec texts parsed
    once, so 10,000 runs take a fraction of a second.
    """
    stmt = _runs_query(limit)
    with db.session() as s:
        rows = _parsed_rows(s.execute(stmt).all())
    n = len(rows)
    base = ("run_id", "created_at", "status", "name", "sweep", "model", "engine", "device", "device_name", "error")
    columns: dict[str, list[Any]] = {c: [None] * n for c in base}
    recipe_cols: dict[str, list[Any]] = {}
    workload_cols: dict[str, list[Any]] = {}
    metric_cols: dict[str, list[Any]] = {}
    quality_cols: dict[str, list[Any]] = {}

    def put(target: dict[str, list[Any]], key: str, i: int, value: Any) -> None:
        column = target.get(key)
        if column is None:
            column = target[key] = [None] * n
        column[i] = value

    for i, (r, parts, metrics, quality) in enumerate(rows):
        for name, value in zip(
            base,
            (r.id, r.created_at, r.status, r.name, r.sweep, r.model, r.engine, r.device, r.device_name, r.error),
            strict=True,
        ):
            columns[name][i] = value
        for k, v in parts[0].items():
            if k != "engine":
                put(recipe_cols, f"recipe.{k}", i, v)
        for k, v in parts[1].items():
            put(workload_cols, f"workload.{k}", i, v)
        for k, v in flatten_metrics(metrics).items():
            put(metric_cols, k, i, v)
        if isinstance(quality, dict):
            for k, v in quality_columns(quality).items():
                put(quality_cols, k, i, v)
    if n == 0:
        return pd.DataFrame()
    for part in (recipe_cols, workload_cols, metric_cols, quality_cols):
        columns.update(part)
    return pd.DataFrame(columns)
