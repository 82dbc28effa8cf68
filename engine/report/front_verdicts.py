"""Who is on a front, and who is tied with whom, by the one verdict (:mod:`engine.report.verdict_matrix`).

- A run **dominates** another when the verdict says it is significantly better on one axis and not
  significantly worse on the other; a run nobody dominates is on the front. So two front runs are either
  significantly different on both axes, in opposite directions, or on neither.
- Two front runs are a **trade-off** when each is significantly better on one axis (the front's line joins
  them); **tied** when neither axis differs significantly and both lie within the margin: Compare's "no
  significant difference" on both axes; otherwise there is **not enough data** to tell them apart
  (an interval reaching past the margin, too few samples, or no interval at all).
- Above :data:`PAIRWISE_LIMIT` runs in a group (:data:`PAIRED_LIMIT` on perplexity), runs clearly behind (another run's whole 95 % box is better
  on both axes) are set aside first; a group still larger is judged by overlapping intervals (the test
  Explore used before), and :class:`Judged` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.jsonvalue import JSONObject
from engine.measure import registry
from engine.report.pareto import pareto_front
from engine.report.values import Z95
from engine.report.verdict_matrix import BETTER, SAME, WORSE, Record, state_matrix

PAIRWISE_LIMIT = 400  # runs of one group judged pair by pair (two matrices of this size squared)
PAIRED_LIMIT = 120  # ... when an axis is perplexity: each pair a quantile over 2,000 paired resamples (~1 s at 120)
MAX_TIE_CHECK = 2000  # front runs compared for overlapping intervals in the approximate judgement


def interval_columns(key: str) -> tuple[str, str]:
    """The frame columns holding a figure's 95 % interval."""
    return f"{key}:lo", f"{key}:hi"


@dataclass(frozen=True)
class Judged:
    """Masks over a group's runs: on the front, tied with another front run, not enough data to tell apart."""

    front: np.ndarray
    tied: np.ndarray
    unclear: np.ndarray
    approximate: bool = False


def _finite(value: object) -> float | None:
    return registry.finite(value)


def row_record(row: pd.Series, keys: Sequence[str]) -> Record:
    """A run's (metrics, quality) rebuilt from a frame row: its figures and their ``KEY:lo``/``KEY:hi``
    interval (an accuracy figure's band is value ± 1.96 standard errors), for a run whose record is not at hand."""
    metrics: JSONObject = {}
    quality: JSONObject = {}
    for key in keys:
        value, (lo, hi) = _finite(row.get(key)), (_finite(row.get(c)) for c in interval_columns(key))
        band = None if lo is None or hi is None else [lo, hi]
        if key.startswith("quality."):
            name = key.removeprefix("quality.")
            quality[name] = value
            if band is not None:
                quality[f"{name}:stderr"] = (hi - lo) / (2 * Z95)
            continue
        metric = registry.lookup(key)
        if metric.group is not None:
            group = metrics.setdefault(metric.group, {"ci": {}})
            group[str(metric.stat)] = value
            group["ci"][str(metric.stat)] = band
        else:
            metrics[key] = value
            metrics.setdefault("ci", {})[key] = band
    return metrics, quality


def _relations(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(front, tied, unclear) masks from the two state matrices (``[i, j]``: run j against run i)."""
    dominated_by = ((x == BETTER) & (y != WORSE)) | ((y == BETTER) & (x != WORSE))
    np.fill_diagonal(dominated_by, False)
    front = ~dominated_by.any(axis=1)
    idx = np.flatnonzero(front)
    fx, fy = x[np.ix_(idx, idx)], y[np.ix_(idx, idx)]
    significant = ((fx == BETTER) | (fx == WORSE)) & ((fy == BETTER) | (fy == WORSE))
    tied = (fx == SAME) & (fy == SAME)
    unclear = ~significant & ~tied
    unclear |= unclear.T
    tied &= tied.T & ~unclear
    np.fill_diagonal(tied, False)
    np.fill_diagonal(unclear, False)
    tied_mask, unclear_mask = np.zeros(front.size, dtype=bool), np.zeros(front.size, dtype=bool)
    unclear_mask[idx] = unclear.any(axis=1)
    tied_mask[idx] = tied.any(axis=1) & ~unclear_mask[idx]
    return front, tied_mask, unclear_mask


def _bands(part: pd.DataFrame, key: str, minimise: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, lo, hi) per run, minimised (negated for a maximised axis); no interval: an unbounded one."""
    value = pd.to_numeric(part[key], errors="coerce").to_numpy(dtype=float)
    lo_col, hi_col = interval_columns(key)
    lo = (
        pd.to_numeric(part[lo_col], errors="coerce").to_numpy(dtype=float)
        if lo_col in part
        else np.full_like(value, np.nan)
    )
    hi = (
        pd.to_numeric(part[hi_col], errors="coerce").to_numpy(dtype=float)
        if hi_col in part
        else np.full_like(value, np.nan)
    )
    lo, hi = (
        np.where(np.isfinite(lo), np.minimum(lo, value), -np.inf),
        np.where(np.isfinite(hi), np.maximum(hi, value), np.inf),
    )
    return (value, lo, hi) if minimise else (-value, -hi, -lo)


def _behind(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Runs some other run beats on both axes with its whole box (its highs below this run's lows; both minimised)."""
    (lo1, hi1), (lo2, hi2) = first, second
    order = np.argsort(hi1, kind="stable")
    best_hi2 = np.minimum.accumulate(hi2[order])
    count = np.searchsorted(hi1[order], lo1, side="left")
    found = np.zeros(lo1.size, dtype=bool)
    has = count > 0
    found[has] = best_hi2[count[has] - 1] < lo2[has]
    return found


def _dominated_on(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Points some other point beats beyond both intervals on the first axis while not losing beyond them on
    the second (both minimised; ``(lo, hi)`` each): O(n log n) by a prefix minimum over the sorted highs."""
    lo1, hi1 = first
    lo2, hi2 = second
    order = np.argsort(hi1, kind="stable")
    best_lo2 = np.minimum.accumulate(lo2[order])
    count = np.searchsorted(hi1[order], lo1, side="left")
    found = np.zeros(lo1.size, dtype=bool)
    has = count > 0
    found[has] = best_lo2[count[has] - 1] <= hi2[has]
    return found


def overlap_front(x: tuple[np.ndarray, ...], y: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The approximate judgement for a group too large to judge pair by pair: (front, tied) from overlapping
    intervals, points as minimised (value, lo, hi) per axis with finite ends."""
    (xv, xlo, xhi), (yv, ylo, yhi) = x, y
    ok = np.isfinite(xv) & np.isfinite(yv)
    front, plain = np.zeros(xv.size, dtype=bool), np.zeros(xv.size, dtype=bool)
    if ok.any():
        idx = np.flatnonzero(ok)
        dominated = _dominated_on((xlo[idx], xhi[idx]), (ylo[idx], yhi[idx]))
        dominated |= _dominated_on((ylo[idx], yhi[idx]), (xlo[idx], xhi[idx]))
        front[idx] = ~dominated
        plain[idx[pareto_front(xv[idx].tolist(), yv[idx].tolist())]] = True
    out = np.zeros(front.size, dtype=bool)
    on = np.flatnonzero(front)
    if 2 <= on.size <= MAX_TIE_CHECK:
        a, b = (xlo[on], xhi[on]), (ylo[on], yhi[on])
        both = (a[0][:, None] <= a[1][None, :]) & (a[0][None, :] <= a[1][:, None])
        both &= (b[0][:, None] <= b[1][None, :]) & (b[0][None, :] <= b[1][:, None])
        np.fill_diagonal(both, False)
        out[on] = both.any(axis=1)
    return front, front & (~plain | out)


def judge(
    part: pd.DataFrame,
    axes: tuple[str, str],
    records: Mapping[int, Record],
    hints: Mapping[str, str] | None,
    minimise: tuple[bool, bool],
) -> Judged:
    """The front of one group's runs (module doc); ``records`` by run id, else rebuilt from the rows."""
    x, y = axes
    n = len(part)
    limit = PAIRED_LIMIT if "quality.perplexity" in axes else PAIRWISE_LIMIT
    keep = np.ones(n, dtype=bool)
    if n > limit:
        bx, by = _bands(part, x, minimise[0]), _bands(part, y, minimise[1])
        keep = ~_behind(bx[1:], by[1:])
        if keep.sum() > limit:
            finite = [tuple(np.where(np.isfinite(e), e, v) for e in (v, lo, hi)) for v, lo, hi in (bx, by)]
            on, tied = overlap_front(finite[0], finite[1])
            return Judged(on, tied, np.zeros(n, dtype=bool), approximate=True)
    idx = np.flatnonzero(keep)
    rows = part.iloc[idx]
    recs = [records.get(int(r["run_id"])) or row_record(r, axes) for _, r in rows.iterrows()]
    states = [
        state_matrix(key, pd.to_numeric(rows[key], errors="coerce").tolist(), recs, hints, lower)
        for key, lower in zip(axes, minimise, strict=True)
    ]
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    for mask, found in zip(masks, _relations(*states), strict=True):
        mask[idx] = found
    return Judged(*masks)
