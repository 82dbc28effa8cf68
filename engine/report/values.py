"""A run's figures as flat metric keys (the registry's keys), with the hints the registry needs."""

from __future__ import annotations

from typing import Any

from engine.measure import registry
from engine.measure.registry import LATENCY_GROUPS, SCALARS, STATS, finite


def flat_metrics(run: Any) -> dict[str, float | None]:
    """A run's metrics as flat keys: ``ttft_ms_p50``, the scalars, ``error_rate`` and ``quality.<metric>``.

    Accuracy bookkeeping (window, stride, counts, stderr companions) is left out.
    """
    metrics = getattr(run, "metrics", None) or {}
    flat: dict[str, float | None] = {}
    for group in LATENCY_GROUPS:
        stats = metrics.get(group) or {}
        for key in STATS:
            flat[f"{group}_{key}"] = finite(stats.get(key))
    for key in SCALARS:
        flat[key] = finite(metrics.get(key))
    flat["error_rate"] = registry.error_rate(metrics) if metrics else None
    flat.update(registry.quality_metrics(getattr(run, "quality", None)))
    return flat


def run_hints(run: Any) -> dict[str, str]:
    """The registry hints of a run: ``{"quality.task:NAME": kind}``."""
    return registry.task_kinds(getattr(run, "quality", None))


def ratio(value: float | None, base: float | None) -> float | None:
    """``value / base``, or None when either is missing or the base is zero."""
    if value is None or base is None or base == 0:
        return None
    return value / base
