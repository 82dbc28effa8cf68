"""A run's requests aggregated for its page: one row per request without its chunks, and the token gaps binned.

A 100,000-request run has millions of chunk stamps; its page draws from this instead (pure numpy):

* **per request** (``columns``, each stored as base64 of little-endian int64): index, warm-up,
  ok, trial, due, sent, first and last chunk, first and last token-bearing chunk (ns since
  ``t0_ns``, the first measured send), output and prompt tokens; the failed requests' reasons. Every per-request figure (TTFT, TPOT, E2EL,
  queueing, requests in flight) is exact from these, and :meth:`Aggregates.endpoint_records`
  gives them back as records with only those stamps (for the per-request diagnostics).
* **the token gaps** (ITL), which only every chunk has: their count, 2,000 order statistics
  (the CDF), a 30-bin histogram, and over time either every gap with its rolling median (up
  to :data:`MAX_POINTS` gaps, as the figure always drew them) or a seeded sample of
  :data:`MAX_POINTS` gaps and the median in :data:`TIME_BINS` time bins (``itl["binned"]``).
* **output tokens/s** in 1 s windows.

The runner stores it with the run (side record ``aggregates``); :func:`summarise` also makes it
from stored requests for runs saved before. :data:`VERSION` changes when the layout does (an
older layout reads as absent and is made again from the requests).
"""

from __future__ import annotations

import base64
import binascii
import gc
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from engine.jsonvalue import JSONObject
from engine.measure.records import RequestRecord

KIND = "aggregates"  # the side record's kind (storage.series)
VERSION = 1
MAX_POINTS = 5000  # points of a scatter; more are sampled (and the median binned)
CDF_POINTS = 2000  # order statistics kept for a CDF
HIST_BINS = 30
TIME_BINS = 400
WINDOW_S = 1.0
NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
COLUMNS: tuple[str, ...] = (
    "index", "warmup", "ok", "trial", "has_chunks", "has_tokens", "arrival", "send",
    "first_chunk", "first_token", "last_token", "last_chunk", "output_tokens", "prompt_tokens",
)  # fmt: skip


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while many small objects are made (each pass would walk the millions
    of stamps already alive): a 100,000-request run's records in a third of the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pack(column: np.ndarray) -> str:
    """A column as base64 of little-endian int64 (a 100,000-request run: megabytes read in milliseconds)."""
    return base64.b64encode(column.astype("<i8").tobytes()).decode("ascii")


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text, validate=True), dtype="<i8").astype(np.int64)


def thin_positions(n: int, limit: int = MAX_POINTS) -> np.ndarray:
    """At most ``limit`` evenly spaced positions of ``n`` (the first and last kept)."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


SMALL_SERIES = 2000  # a rolling median over at most this many points is taken without pandas (its import: ~0.4 s)


def rolling_median(values: np.ndarray, window: int | None = None) -> np.ndarray:
    """Centred rolling median over ``window`` points (default: a twentieth of the series, 5 to 501), as pandas'
    ``rolling(k, center=True, min_periods=1).median()``; a short series without importing pandas."""
    n = int(values.size)
    if n == 0:
        return values.astype(float)
    k = window or min(501, max(5, n // 20))
    if n <= SMALL_SERIES:  # the same windows as pandas' centred ones: k // 2 points before, the rest after
        x, before, after = values.astype(float), k // 2, k - 1 - k // 2
        return np.array([np.median(x[max(0, i - before) : i + after + 1]) for i in range(n)])
    import pandas as pd

    return pd.Series(values, dtype=float).rolling(k, center=True, min_periods=1).median().to_numpy()


def windowed_rate(times_s: np.ndarray, counts: np.ndarray, window_s: float = WINDOW_S) -> tuple[np.ndarray, np.ndarray]:
    """(window starts, counts per second) in ``window_s`` windows; the last is scaled by the length it covers."""
    if times_s.size == 0:
        return np.zeros(0), np.zeros(0)
    end = float(times_s.max())
    n_windows = max(1, math.ceil(end / window_s))  # the last edge is inclusive
    edges = np.arange(n_windows + 1) * window_s
    sums, _ = np.histogram(times_s, bins=edges, weights=counts)
    widths = np.full(n_windows, window_s)
    widths[-1] = max(end - edges[-2], window_s * 0.05)
    return edges[:-1], sums / widths


def cdf_points(values: np.ndarray | Sequence[float], limit: int = CDF_POINTS) -> JSONObject:
    """``{"n", "ranks", "values"}``: the sorted sample through at most ``limit`` order statistics."""
    n = len(values)
    ranks = np.unique(np.linspace(0, n - 1, min(n, limit)).round().astype(int)) if n else np.zeros(0, dtype=int)
    vals = np.sort(np.asarray(values, dtype=float))[ranks] if n else np.zeros(0)
    return {"n": n, "ranks": ranks.tolist(), "values": vals.tolist()}


def histogram(values: np.ndarray | Sequence[float], bins: int = HIST_BINS) -> JSONObject:
    """``{"n", "counts", "edges"}`` of ``min(bins, n)`` equal bins over the sample's range."""
    vals = np.asarray(values, dtype=float)
    if vals.size == 0:
        return {"n": 0, "counts": [], "edges": []}
    counts, edges = np.histogram(vals, bins=min(bins, max(1, vals.size)))
    return {"n": int(vals.size), "counts": counts.tolist(), "edges": edges.tolist()}


def binned_median(t: np.ndarray, y: np.ndarray, bins: int = TIME_BINS) -> tuple[np.ndarray, np.ndarray, float]:
    """(bin centres, the median of ``y`` in each non-empty time bin, the bin width in s)."""
    if t.size == 0:
        return np.zeros(0), np.zeros(0), 0.0
    width = max(float(t.max()) / bins, 1e-9)
    which = np.minimum((t / width).astype(np.int64), bins - 1).astype(np.int16)
    order = np.argsort(which, kind="stable")  # a radix sort of small integers
    bounds = np.searchsorted(which[order], np.arange(bins + 1))
    centres, medians = [], []
    for b in range(bins):
        lo, hi = bounds[b], bounds[b + 1]
        if hi > lo:
            centres.append((b + 0.5) * width)
            medians.append(float(np.median(y[order[lo:hi]])))
    return np.asarray(centres), np.asarray(medians), width


def scatter(t: np.ndarray, y: np.ndarray, seed: int = 0) -> JSONObject:
    """Points over time and their median line: every point and its rolling median (as the figure always
    drew them, thinned evenly) up to :data:`MAX_POINTS`; beyond, a seeded sample and the binned median."""
    n = int(t.size)
    if n <= MAX_POINTS:
        order = np.lexsort((y, t))  # by time, then value
        t, y = t[order], y[order]
        return {"n": n, "binned": False, "t": t.tolist(), "y": y.tolist(), "median_t": t.tolist(),
                "median_y": rolling_median(y).tolist()}  # fmt: skip
    keep = np.random.default_rng(seed).choice(n, MAX_POINTS, replace=False)
    keep = keep[np.lexsort((y[keep], t[keep]))]
    centres, medians, width = binned_median(t, y)
    return {"n": n, "binned": True, "bin_s": width, "t": t[keep].tolist(), "y": y[keep].tolist(),
            "median_t": centres.tolist(), "median_y": medians.tolist()}  # fmt: skip


@dataclass
class Aggregates:
    """A run's requests aggregated (module doc); numpy columns, JSON out and back."""

    t0_ns: int
    columns: dict[str, np.ndarray]
    errors: dict[int, str] = field(default_factory=dict)  # position -> the failed request's reason
    itl: JSONObject = field(default_factory=dict)
    tokens_per_s: JSONObject = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.columns["index"].size)

    def to_json(self) -> JSONObject:
        """JSON-ready (strict: no NaN) for the run's side record."""
        return {
            "version": VERSION,
            "t0_ns": self.t0_ns,
            "columns": {k: _pack(self.columns[k]) for k in COLUMNS},
            "errors": {str(k): v for k, v in self.errors.items()},
            "itl": self.itl,
            "tokens_per_s": self.tokens_per_s,
        }

    @classmethod
    def from_json(cls, body: object) -> Aggregates | None:
        """Read a stored record back; None when it is of another version or not one."""
        if not isinstance(body, dict) or body.get("version") != VERSION:
            return None
        try:
            columns = {k: _unpack(body["columns"][k]) for k in COLUMNS}
            errors = {int(k): str(v) for k, v in (body.get("errors") or {}).items()}
            return cls(int(body["t0_ns"]), columns, errors, dict(body["itl"]), dict(body["tokens_per_s"]))
        except (KeyError, TypeError, ValueError, binascii.Error):
            return None

    def mask(self, ok: bool = False) -> np.ndarray:
        """The measured requests (warm-up left out); with ``ok``, only those that succeeded with a token."""
        c = self.columns
        keep = c["warmup"] == 0
        return keep & (c["ok"] == 1) & (c["has_tokens"] == 1) if ok else keep

    def ms(self, name: str) -> np.ndarray:
        """A per-request figure in ms over the successful measured requests: ``ttft``, ``e2el``, ``tpot``."""
        c, m = self.columns, self.mask(ok=True)
        first, last = c["first_token"][m] - c["send"][m], c["last_token"][m] - c["send"][m]
        if name == "ttft":
            return first / NS_PER_MS
        if name == "e2el":
            return last / NS_PER_MS
        n_out = c["output_tokens"][m]
        many = n_out > 1
        return ((last[many] - first[many]) / (n_out[many] - 1)) / NS_PER_MS

    def endpoint_records(self, positions: Sequence[int] | np.ndarray | None = None) -> list[RequestRecord]:
        """The requests (all, or those at ``positions``) with only their first and last chunk and token-bearing
        stamps: every per-request figure but their token gaps (the diagnostics, server metrics, timeline)."""
        where = np.arange(len(self)) if positions is None else np.asarray(positions, dtype=np.int64)
        names = ("index", "arrival", "send", "prompt_tokens", "warmup", "trial", "ok", "has_chunks", "has_tokens")
        names += ("first_chunk", "first_token", "last_token", "last_chunk", "output_tokens")
        t0 = self.t0_ns
        cols = [where.tolist()] + [(self.columns[k][where] + (t0 if k in _TIMES else 0)).tolist() for k in names]
        errors = self.errors
        with gc_paused():
            return [
                RequestRecord(
                    index,
                    arrival,
                    send,
                    prompt,
                    *_endpoints(chunks, tokens, fc, ft, lt, lc, n),
                    errors.get(pos),
                    bool(warmup),
                    trial,
                    cancelled=not ok and pos not in errors,
                )
                for pos, index, arrival, send, prompt, warmup, trial, ok, chunks, tokens, fc, ft, lt, lc, n in zip(
                    *cols, strict=True
                )
            ]


_TIMES = frozenset({"arrival", "send", "first_chunk", "first_token", "last_token", "last_chunk"})


def _endpoints(chunks: int, tokens: int, fc: int, ft: int, lt: int, lc: int, n: int) -> tuple[list[int], list[int]]:
    """Four stamps (first chunk, first and last token, last chunk) carrying the request's tokens."""
    if not chunks:
        return [], []
    if not tokens:
        return [fc, lc], [0, 0]
    return [fc, ft, lt, lc], [0, 1, n - 1, 0]


def _row(r: RequestRecord, t0: int) -> tuple[list[int], list[int]]:
    """One request's column values, and its token-bearing stamps."""
    tokens = r.chunk_tokens
    bearing = (
        r.chunk_ns if min(tokens, default=1) > 0 else [t for t, n in zip(r.chunk_ns, tokens, strict=True) if n > 0]
    )
    chunks = r.chunk_ns
    row = [r.index, int(r.warmup), int(r.ok), r.trial, int(bool(chunks)), int(bool(bearing)),
           r.arrival_ns - t0, r.send_ns - t0, (chunks[0] - t0) if chunks else 0, (bearing[0] - t0) if bearing else 0,
           (bearing[-1] - t0) if bearing else 0, (chunks[-1] - t0) if chunks else 0, sum(tokens), r.prompt_tokens]  # fmt: skip
    return row, bearing


def summarise(requests: Sequence[RequestRecord]) -> Aggregates:
    """The aggregates of a run's requests (module doc): one pass in Python, the rest in numpy."""
    measured = [r for r in requests if not r.warmup]
    t0 = min((r.send_ns for r in measured), default=min((r.send_ns for r in requests), default=0))
    rows, flat, counts, ends, errors = [], [], [], [], {}
    with gc_paused():
        _collect(requests, t0, rows, flat, counts, ends, errors)
    table = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(COLUMNS))
    columns = {k: np.ascontiguousarray(table[:, j]) for j, k in enumerate(COLUMNS)}
    stamps = np.asarray(flat, dtype=np.int64)
    times_s = (stamps - t0) / NS_PER_S
    t, y = windowed_rate(times_s, np.asarray(counts, dtype=float))
    return Aggregates(
        t0, columns, errors, _gaps(stamps, ends, t0), {"window_s": WINDOW_S, "t": t.tolist(), "y": y.tolist()}
    )


def _collect(
    requests: Sequence[RequestRecord], t0: int, rows: list, flat: list, counts: list, ends: list, errors: dict
) -> None:
    """The pass over the requests: their rows, and the successful measured ones' token stamps end to end."""
    for i, r in enumerate(requests):
        row, bearing = _row(r, t0)
        rows.append(row)
        if r.error is not None:
            errors[i] = r.error
        if r.warmup or not r.ok or not bearing:
            continue
        flat.extend(bearing)
        counts.extend(r.chunk_tokens if bearing is r.chunk_ns else [n for n in r.chunk_tokens if n > 0])
        ends.append(len(flat))


def _gaps(stamps: np.ndarray, ends: list[int], t0: int) -> JSONObject:
    """The token gaps' CDF, histogram and points over time (at the later chunk of each gap)."""
    if stamps.size < 2:
        gaps, at = np.zeros(0), np.zeros(0)
    else:
        keep = np.ones(stamps.size - 1, dtype=bool)
        keep[np.asarray(ends[:-1], dtype=np.int64) - 1] = False
        gaps = (np.diff(stamps)[keep]) / NS_PER_MS
        at = (stamps[1:][keep] - t0) / NS_PER_S
    return {"cdf": cdf_points(gaps), "hist": histogram(gaps), "over_time": scatter(at, gaps)}
