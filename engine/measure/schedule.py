"""Was a schedule kept? Lateness of sends, computed once for every page (pure: numpy only).

Two figures say how late a request went out, and they are different questions:

* **send minus due** (schedule lateness): a request's send stamp minus its due time (a trace's row,
  an arrival process's draw). It grows when the engine falls behind: an engine that serves one
  request at a time makes every request wait for the one before.
* **the client's send lag**: the send stamp minus the moment the request *could* go out (its due time,
  or when a concurrency slot freed; :mod:`engine.measure.client_lag`). It grows only when the client
  itself is late.

A run can keep its client's send lag under a millisecond while its schedule slips by a minute; both
are computed by :func:`lateness` and written by :func:`lateness_words`, in units a person reads
(:func:`duration_text`: ``0.26 ms``, ``58.5 ms``, ``1.36 s``, ``69 s``).

**The schedule was kept** (:func:`schedule_of`) when the p90 of send minus due is at most
:data:`SHARE` (10 %) of the median gap between consecutive due times, or at most :data:`FLOOR_MS`
(1 ms: the event loop's timer resolution), whichever is larger. When it was not kept, latency from
the due time is the latency a user would feel, and the pages put it first (latency from the send beside it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from engine.jsonvalue import JSONMapping, JSONObject

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord

SHARE = 0.10  # of the median gap between due times: the lateness (p90) a kept schedule allows
FLOOR_MS = 1.0  # lateness below this is always "kept" (timers fire in whole milliseconds on uvloop)
NS_PER_MS = 1_000_000
RULE = (
    "a schedule is kept when the 90th percentile of send minus due is at most 10 % of the median gap between "
    "due times (or 1 ms, whichever is larger)"
)


def _in_unit(ms: float, top: float) -> tuple[str, str]:
    """(number, unit) of ``ms`` in the unit and precision that ``top`` (the larger figure beside it) calls for."""
    if top < 10:
        return f"{ms:.2f}", "ms"
    if top < 100:
        return f"{ms:.1f}", "ms"
    if top < 1000:
        return f"{ms:.0f}", "ms"
    if top < 10_000:
        return f"{ms / 1000:.2f}", "s"
    return f"{ms / 1000:,.0f}", "s"


def duration_text(ms: float | None) -> str:
    """A duration for people: ``0.26 ms``, ``58.5 ms``, ``153 ms``, ``1.36 s``, ``69 s``, ``1,234 s``; ``–`` for None."""
    if ms is None or not np.isfinite(ms):
        return "–"
    number, unit = _in_unit(ms, abs(ms))
    return f"{number} {unit}"


def span_text(lo: float | None, hi: float | None) -> str:
    """An interval in the unit of its larger end: ``70–73 s``, ``1.20–1.40 s``, ``8.10–9.30 ms`` ("" when open)."""
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    top = max(abs(lo), abs(hi))
    (low, unit), (high, _) = _in_unit(lo, top), _in_unit(hi, top)
    return f"{low}–{high} {unit}"


def lateness(values_ms: Iterable[float] | np.ndarray) -> dict[str, float | int | None]:
    """``{"p50", "p90", "p99", "max" (ms), "n"}`` of lateness samples (None each when there are none):
    the one computation behind every "send lag" and "send minus due" a page or the result shows."""
    arr = np.asarray(values_ms if isinstance(values_ms, np.ndarray) else list(values_ms), dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return {"p50": None, "p90": None, "p99": None, "max": None, "n": 0}
    p50, p90, p99 = (float(v) for v in np.percentile(arr, [50, 90, 99]))
    return {"p50": p50, "p90": p90, "p99": p99, "max": float(arr.max()), "n": int(arr.size)}


def lateness_words(stats: JSONMapping, what: str) -> str:
    """``send minus due: p50 1.50 ms, p99 3.00 ms, max 3.00 ms over 12 requests`` (``what`` names the figure)."""
    n = stats.get("n")
    if stats.get("p50") is None:
        return f"{what}: no measured request"
    count = f" over {n:,} requests" if n else ""
    return (
        f"{what}: p50 {duration_text(stats['p50'])}, p99 {duration_text(stats.get('p99'))}, "
        f"max {duration_text(stats.get('max'))}{count}"
    )


def median_gap_ms(due_ns: Sequence[int] | np.ndarray) -> float | None:
    """The median gap between consecutive due times (sorted), in ms; None for fewer than two."""
    due = np.sort(np.asarray(due_ns, dtype=np.int64))
    if due.size < 2:
        return None
    return float(np.median(np.diff(due))) / NS_PER_MS


def schedule_of(due_ns: Sequence[int] | np.ndarray, send_ns: Sequence[int] | np.ndarray) -> JSONObject | None:
    """The run's ``schedule`` group from its measured requests' due and send stamps (sent ones only):
    ``{"send_minus_due_ms": lateness, "gap_ms_p50", "limit_ms", "kept"}``; None without a request."""
    due = np.asarray(due_ns, dtype=np.int64)
    send = np.asarray(send_ns, dtype=np.int64)
    sent = send > 0
    due, send = due[sent], send[sent]
    if due.size == 0:
        return None
    late = lateness(np.maximum(send - due, 0) / NS_PER_MS)
    gap = median_gap_ms(due)
    limit = max(FLOOR_MS, SHARE * gap) if gap is not None else FLOOR_MS
    return {"send_minus_due_ms": late, "gap_ms_p50": gap, "limit_ms": limit, "kept": bool(late["p90"] <= limit)}


def schedule_of_records(records: Iterable[RequestRecord]) -> JSONObject | None:
    """:func:`schedule_of` over measured :class:`~engine.measure.records.RequestRecord` s (warm-up left out)."""
    rows = [(r.arrival_ns, r.send_ns) for r in records if not r.warmup]
    if not rows:
        return None
    due, send = zip(*rows, strict=True)
    return schedule_of(due, send)


def kept_words(schedule: JSONMapping) -> str:
    """``not kept: requests went out 54 s after their due time (p90), far more than 25 ms (10 % of the median gap
    between due times, 250 ms)``, or ``kept: ...`` (the module's rule, with this run's figures)."""
    late = schedule.get("send_minus_due_ms") or {}
    gap, limit = schedule.get("gap_ms_p50"), schedule.get("limit_ms")
    basis = (
        "1 ms"
        if gap is None or limit == FLOOR_MS
        else f"10 % of the median gap between due times, {duration_text(gap)}"
    )
    if schedule.get("kept"):
        return (
            f"kept: 90 % of requests went out within {duration_text(late.get('p90'))} of their due time "
            f"(the limit: {duration_text(limit)}, {basis})"
        )
    return (
        f"not kept: requests went out {duration_text(late.get('p90'))} after their due time (p90), more than "
        f"{duration_text(limit)} ({basis})"
    )
