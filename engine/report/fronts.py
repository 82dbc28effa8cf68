"""Pareto fronts that respect uncertainty and workload (pure): Explore's fronts and the report's.

- **Intervals on both axes** (:func:`with_intervals`): each run's stored 95 % interval of a speed
  figure, or value ± 1.96 standard errors of an accuracy figure, as ``KEY:lo`` / ``KEY:hi``
  columns; a run without one keeps its value as both ends.
- **Beyond noise** (:func:`uncertain_front`): a run is dominated only when another is better on one
  axis beyond both intervals (they do not overlap) and not worse beyond them on the other. The
  runs nobody dominates so are the front; those of them off the plain front (the values alone),
  or whose intervals overlap another front run's on both axes, are *tied*: within noise, drawn
  as a band, never joined by the front's line as a trade-off.
- **Like with like** (:func:`front_groups`): a front is computed within one model and workload
  (what is sent: prompt and output lengths, batch, arrivals, traffic; not how many requests
  measured it); runs of other models or workloads get fronts of their own, and
  :func:`group_differences` says what differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from engine.measure import registry
from engine.report.pareto import pareto_front
from engine.report.recipes import workload_words
from engine.report.values import band_of
from engine.spec import sources

# Workload fields that say how much was measured, not what was sent: runs differing only in them share a front.
MEASUREMENT_FIELDS = frozenset(
    {
        "requests",
        "trials",
        "warmup_requests",
        "seed",
        "until_ci_pct",
        "until_metric",
        "max_requests",
        "max_seconds",
        "soak_minutes",
        "profile_steps",
        "max_error_rate",
    }
)


def interval_columns(key: str) -> tuple[str, str]:
    """The frame columns holding a figure's 95 % interval."""
    return f"{key}:lo", f"{key}:hi"


def with_intervals(
    frame: pd.DataFrame, keys: list[str], records: Mapping[int, tuple[Mapping[str, Any], Mapping[str, Any]]]
) -> pd.DataFrame:
    """``frame`` with ``KEY:lo`` and ``KEY:hi`` for each of ``keys``, from each run's stored (metrics, quality)."""
    out = frame.copy()
    for key in dict.fromkeys(keys):
        if key not in out.columns:
            continue
        lows, highs = [], []
        for run_id, value in zip(out["run_id"], pd.to_numeric(out[key], errors="coerce"), strict=True):
            metrics, quality = records.get(int(run_id), ({}, {}))
            band = None if pd.isna(value) else band_of(SimpleNamespace(metrics=metrics, quality=quality), key, value)
            lows.append(np.nan if band is None else band[0])
            highs.append(np.nan if band is None else band[1])
        lo, hi = interval_columns(key)
        out[lo], out[hi] = lows, highs
    return out


def _ends(frame: pd.DataFrame, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    value = pd.to_numeric(frame[key], errors="coerce").to_numpy(dtype=float)
    lo_col, hi_col = interval_columns(key)
    lo = pd.to_numeric(frame[lo_col], errors="coerce").to_numpy(dtype=float) if lo_col in frame else value.copy()
    hi = pd.to_numeric(frame[hi_col], errors="coerce").to_numpy(dtype=float) if hi_col in frame else value.copy()
    lo, hi = (
        np.where(np.isfinite(lo), np.minimum(lo, value), value),
        np.where(np.isfinite(hi), np.maximum(hi, value), value),
    )
    return value, lo, hi


def _dominated_on(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Points some other point beats beyond both intervals on the first axis while not losing beyond them on
    the second (both minimised; ``(lo, hi)`` each): O(n log n) by a prefix minimum over the sorted highs."""
    lo1, hi1 = first
    lo2, hi2 = second
    order = np.argsort(hi1, kind="stable")
    best_lo2 = np.minimum.accumulate(lo2[order])
    count = np.searchsorted(hi1[order], lo1, side="left")  # how many points end below this one's low
    found = np.zeros(lo1.size, dtype=bool)
    has = count > 0
    found[has] = best_lo2[count[has] - 1] <= hi2[has]
    return found


def uncertain_front(
    x: tuple[np.ndarray, np.ndarray, np.ndarray],
    y: tuple[np.ndarray, np.ndarray, np.ndarray],
    minimise_x: bool = True,
    minimise_y: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(on the front, tied with it) masks for points given as (value, lo, hi) per axis (module doc)."""
    (xv, xlo, xhi), (yv, ylo, yhi) = x, y
    if not minimise_x:
        xv, xlo, xhi = -xv, -xhi, -xlo
    if not minimise_y:
        yv, ylo, yhi = -yv, -yhi, -ylo
    ok = np.isfinite(xv) & np.isfinite(yv)
    front = np.zeros(xv.size, dtype=bool)
    plain = np.zeros(xv.size, dtype=bool)
    if ok.any():
        idx = np.flatnonzero(ok)
        dominated = _dominated_on((xlo[idx], xhi[idx]), (ylo[idx], yhi[idx]))
        dominated |= _dominated_on((ylo[idx], yhi[idx]), (xlo[idx], xhi[idx]))
        front[idx] = ~dominated
        plain[idx[pareto_front(xv[idx].tolist(), yv[idx].tolist())]] = True
    return front, front & (~plain | _overlapping(front, (xlo, xhi), (ylo, yhi)))


MAX_TIE_CHECK = 2000  # front runs compared pairwise for overlapping intervals (beyond that: off-front ties only)


def _overlapping(front: np.ndarray, x: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Front runs whose intervals overlap another front run's on both axes: the gap between them is noise."""
    out = np.zeros(front.size, dtype=bool)
    idx = np.flatnonzero(front)
    if idx.size < 2 or idx.size > MAX_TIE_CHECK:
        return out
    (xlo, xhi), (ylo, yhi) = (a[idx] for a in x), (a[idx] for a in y)
    both = (xlo[:, None] <= xhi[None, :]) & (xlo[None, :] <= xhi[:, None])
    both &= (ylo[:, None] <= yhi[None, :]) & (ylo[None, :] <= yhi[:, None])
    np.fill_diagonal(both, False)
    out[idx] = both.any(axis=1)
    return out


def workload_key(row: Mapping[str, Any]) -> str:
    """What a run sent, in words (``64→16 × 8 req`` without the request count): runs with one key share a front."""
    fields = {
        k.removeprefix("workload."): v
        for k, v in row.items()
        if k.startswith("workload.") and k.removeprefix("workload.") not in MEASUREMENT_FIELDS and _present(v)
    }
    words = workload_words({**fields, "requests": "n"}).replace(" × n req", "")
    defaults = _workload_defaults()
    rest = sorted(
        f"{k.replace('_', ' ')} {v}"
        for k, v in fields.items()
        if k not in _IN_WORDS and (k not in defaults or defaults[k] != v)
    )
    return " · ".join([words, *rest])


_IN_WORDS = frozenset(
    ("output_tokens", "batch_size", "arrival", "rate", "max_concurrency", *sources.flat_field_names())
)  # the source's words name its file, format and scale (never a path or a hash)


@lru_cache(maxsize=1)
def _workload_defaults() -> dict[str, Any]:
    from engine.spec import Workload

    return Workload().flat()


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value))


def front_groups(frame: pd.DataFrame) -> pd.Series:
    """Each run's group (``model · workload``): a front is computed within one group."""
    if frame.empty:
        return pd.Series([], dtype=object)
    work_cols = [c for c in frame.columns if c.startswith("workload.")]
    models = frame["model"].astype(str) if "model" in frame.columns else pd.Series("", index=frame.index)
    memo: dict[tuple[Any, ...], str] = {}
    keys = []
    for values in zip(*(frame[c].tolist() for c in work_cols), strict=True) if work_cols else [()] * len(frame):
        marker = tuple(repr(v) for v in values)
        if marker not in memo:
            memo[marker] = workload_key(dict(zip(work_cols, values, strict=True)))
        keys.append(memo[marker])
    return models + " · " + pd.Series(keys, index=frame.index, dtype=object)


def group_differences(frame: pd.DataFrame) -> list[str]:
    """What differs between the groups of ``frame``, in words (``model: a, b``; ``workload: 64→16, 16→8``)."""
    if frame.empty:
        return []
    groups = front_groups(frame)
    parts = []
    models = sorted({str(m) for m in frame["model"]}) if "model" in frame.columns else []
    if len(models) > 1:
        parts.append("model: " + ", ".join(models[:4]) + (" ..." if len(models) > 4 else ""))
    workloads = sorted({g.split(" · ", 1)[1] if " · " in g else g for g in groups})
    if len(workloads) > 1:
        parts.append("workload: " + "; ".join(workloads[:4]) + (" ..." if len(workloads) > 4 else ""))
    return parts


@dataclass(frozen=True)
class Fronts:
    """The fronts of a scatter: per group, its runs on the front (ordered by x) and those tied with it."""

    groups: dict[str, list[int]] = field(default_factory=dict)  # group -> run ids on the front, by x
    tied: dict[str, list[int]] = field(default_factory=dict)  # group -> run ids within noise of the front
    differences: list[str] = field(default_factory=list)

    def run_ids(self) -> list[int]:
        """Every run on a front (ties included), group by group."""
        return [i for g in self.groups for i in self.groups[g]]


def _direction(key: str, hints: Mapping[str, str] | None, given: bool | None) -> bool | None:
    if given is not None:
        return given
    metric = registry.lookup(key, (hints or {}).get(key))
    return metric.minimise if metric.is_metric else None


def pareto_fronts(
    frame: pd.DataFrame,
    x: str,
    y: str,
    hints: Mapping[str, str] | None = None,
    minimise: tuple[bool | None, bool | None] = (None, None),
) -> Fronts:
    """The fronts of ``x`` against ``y``, one per model and workload; directions from the registry unless
    ``minimise`` gives them (no front on an axis that is not a metric)."""
    if frame.empty or x not in frame.columns or y not in frame.columns:
        return Fronts()
    mx, my = _direction(x, hints, minimise[0]), _direction(y, hints, minimise[1])
    if mx is None or my is None:
        return Fronts()
    data = frame[pd.to_numeric(frame[x], errors="coerce").notna() & pd.to_numeric(frame[y], errors="coerce").notna()]
    groups = front_groups(data)
    out = Fronts(differences=group_differences(data))
    for name in sorted(groups.unique().tolist()):
        part = data[groups == name]
        on, tied = uncertain_front(_ends(part, x), _ends(part, y), mx, my)
        ordered = part[on].sort_values([x, y])
        out.groups[name] = [int(i) for i in ordered["run_id"]]
        out.tied[name] = [int(i) for i in part[tied]["run_id"]]
    return out
