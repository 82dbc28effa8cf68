"""Was the server saturated? A verdict on one serving run from its raw records (pure).

A server is saturated when it cannot keep up with the load it is offered: requests pile up
faster than it finishes them. Two kinds of run, two kinds of evidence:

* **Open loop** (arrival ``poisson`` or ``gamma``, a trace): requests are due on a schedule.
  Saturated when the server *achieved* fewer completions per second than were due
  (achieved < ``BEHIND`` x offered; both rates taken between the same middle ranks, the 10th
  and 90th percentile, of the sorted completion and due times, so a short run's drain does
  not read as falling behind) **and** the queue grew: requests in flight, counted from their
  due time (so requests still waiting in the client count), sampled at each due time, their
  least-squares slope over time with a 95 % t-interval above 0. The first requests fill the
  pipeline (in flight rises to rate x latency however fast the server is), so samples due
  before the first requests' unqueued latency has passed are left out. The server's own waiting
  queue (``num_requests_waiting``, where the engine serves ``/metrics``) growing counts as the
  queue growing, and so does TTFT from the due time rising over the run (GuideLLM's second
  slope; the one left when every request was due within less than a latency). Failed and
  cancelled requests count as finished when they ended.
* **Closed loop** (arrival ``concurrency``): the client keeps N requests in flight by
  construction, so nothing piles up on its side. Saturated when the server kept requests
  waiting in at least half of its samples (its batch is full), or its KV cache was full and it
  preempted requests. Without server metrics one run cannot tell (None); in a sweep
  :func:`against_previous` judges the step from the previous concurrency: throughput gained
  less than half of the extra load (the knee rule of :mod:`engine.report.loadcurve`).

GuideLLM's ``over_saturation`` constraint has the same shape (slopes of concurrent requests and
of TTFT over time, with a margin of error) but judges during a run after 30 s; a sweep point here
may last seconds, so the whole measured phase is judged after it, each trial on its own.

How often it is right, on simulated servers with Poisson arrivals and 30 requests a run
(``tests/engine/measure/test_saturation.py`` simulates them): a one-slot server is never called
saturated at half its capacity, in 7 % of runs at 80 % and 13 % at 90 % (runs whose arrivals, by
chance, came faster than it serves for most of the run), in 96 % at 130 % and always at 200 %;
with 100 requests a run, never below capacity. A 16-slot server: 0 % at half load, 2 % at 80 %,
77 % at 130 %, 100 % at 200 %. A load just above capacity (under ``1 / BEHIND``) is not flagged.

Too few requests (``MIN_REQUESTS``) or samples: "cannot tell" (None), never a guess. The verdict
carries its evidence in words (``reason``) and in figures (``evidence``), and is stored with the
run as its ``saturation`` side record (:func:`Verdict.to_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.records import RequestRecord
from engine.measure.stamps import ttft_ns

RECORD = "saturation"  # the side record of every serving run with an arrival process: its verdict
STOP_RECORD = "sweep_stop"  # the side record of the run that stopped its sweep (engine/jobs/saturation_stop.py)
CONFIDENCE = 0.95
MIN_REQUESTS = 8  # measured requests a verdict needs
MIN_SAMPLES = 5  # points a slope needs once the pipeline's filling is left out
BEHIND = 0.9  # achieved below this share of the offered rate is falling behind
GAIN_FLOOR = 0.5  # closed loop: throughput must gain at least half of the extra concurrency
WAITING_SHARE = 0.5  # closed loop: requests waiting at the server in at least half of its samples
KV_FULL = 0.99  # KV cache usage that counts as full
OPEN_LOOP = frozenset({"poisson", "gamma", "trace"})
CLOSED_LOOP = "concurrency"
NS = 1e9
RANKS = 0.1  # rates are taken between these ranks (and 1 - RANKS) of the sorted times


def _g(value: float | None) -> str:
    """A figure for people: three significant digits (``2.13``, ``7.9``, ``150``)."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


@dataclass(frozen=True)
class Slope:
    """A least-squares slope (units per second) with its t-interval, over ``n`` points."""

    per_s: float
    lo: float
    hi: float
    n: int

    @property
    def rising(self) -> bool:
        """The interval lies above 0: the figure grew."""
        return self.lo > 0

    def words(self, unit: str = "/s") -> str:
        """``2.1/s (95 % CI 1.6–2.6)``."""
        return f"{_g(self.per_s)}{unit} (95 % CI {_g(self.lo)}–{_g(self.hi)})"


def slope(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE
) -> Slope | None:
    """The least-squares slope of ``y`` on ``x`` with its t-interval; None for under 3 points or a constant ``x``.

    The interval takes the points as independent. A queue sampled at each arrival is not (each
    sample carries most of the last), so on its own the interval is too narrow; the open-loop
    verdict therefore also asks that the server fell behind the offered rate (module doc). An AR(1)
    correction of the points' number was tried and dropped: a saturated queue is a random walk with
    drift, whose residuals look fully correlated, so it hid most saturated runs of 30 requests.
    """
    from scipy.stats import t

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = int(xs.size)
    if n < 3:
        return None
    xc = xs - xs.mean()
    sxx = float(xc @ xc)
    if sxx <= 0:
        return None
    b = float(xc @ (ys - ys.mean())) / sxx
    resid = ys - ys.mean() - b * xc
    se = math.sqrt(float(resid @ resid) / (n - 2) / sxx)
    half = float(t.ppf(0.5 + confidence / 2, n - 2)) * se
    return Slope(b, b - half, b + half, n)


@dataclass(frozen=True)
class Verdict:
    """Saturated or not (None: cannot tell), why in one line, and the figures behind it.

    ``offered`` is requests/s (open loop) or requests in flight (closed loop); ``achieved``
    requests completed per second. ``evidence`` holds the slopes (``in_flight``, ``ttft``,
    ``server_waiting``: dicts of :class:`Slope`) and the server's figures where there were some.
    """

    saturated: bool | None
    reason: str
    loop: str  # "open" | "closed" | "none"
    offered: float | None = None
    achieved: float | None = None
    evidence: JSONObject = field(default_factory=dict)

    @property
    def label(self) -> str:
        return {True: "saturated", False: "not saturated"}.get(self.saturated, "cannot tell")  # type: ignore[arg-type]

    def to_dict(self) -> JSONObject:
        """The stored form (strict JSON: plain numbers, strings, lists and dicts)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONMapping | None) -> Verdict | None:
        """A stored verdict read back (None for nothing or something else)."""
        if not isinstance(data, Mapping) or "saturated" not in data or "reason" not in data:
            return None
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def _end_ns(r: RequestRecord) -> int:
    """When a request stopped occupying the server: its last chunk (its send when none came)."""
    return max([r.send_ns, *r.chunk_ns])


def _rank_rate(times: np.ndarray) -> float | None:
    """Events per second between the RANKS and 1 - RANKS order statistics of sorted ``times`` (ns)."""
    n = int(times.size)
    k1 = int(RANKS * n)
    k2 = n - 1 - k1
    if k2 <= k1:
        return None
    span = float(times[k2] - times[k1])
    return (k2 - k1) / (span / NS) if span > 0 else None


def judge(
    requests: Sequence[RequestRecord],
    arrival: str | None,
    offered: float | None = None,
    server: JSONMapping | None = None,
) -> Verdict:
    """The verdict on a run's measured requests (warm-up left out); each trial is judged on its own
    and the first saturated one is the verdict (else the last). ``offered``: the configured rate or
    concurrency, for the words; ``server``: the run's stored ``server_metrics`` record, if any."""
    if arrival not in OPEN_LOOP and arrival != CLOSED_LOOP:
        why = "everything sent at once" if arrival == "max" else f"arrival {arrival or 'unknown'}"
        return Verdict(None, f"not judged: {why} (no offered load to keep up with)", "none", offered)
    trials: dict[int, list[RequestRecord]] = {}
    for r in requests:
        if not r.warmup and r.send_ns:
            trials.setdefault(r.trial, []).append(r)
    if not trials:
        return Verdict(None, "cannot tell: no measured request was sent", "none", offered)
    judge_one = _open_loop if arrival in OPEN_LOOP else _closed_loop
    verdicts = [judge_one(trials[k], offered, server) for k in sorted(trials)]
    return next((v for v in verdicts if v.saturated), verdicts[-1])


def _series_points(
    server: JSONMapping | None, name: str, origin_ns: float, start_s: float, end_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """(seconds since ``origin_ns``, values) of a server series field between ``start_s`` and ``end_s``."""
    if not server:
        return np.zeros(0), np.zeros(0)
    values = (server.get("fields") or {}).get(name) or []
    shift = (float(server.get("t0_ns") or origin_ns) - origin_ns) / NS
    pts = [
        (shift + float(t), float(v))
        for t, v in zip(server.get("t_s") or [], values, strict=False)
        if isinstance(v, (int, float)) and start_s <= shift + float(t) <= end_s
    ]
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def _slope_dict(s: Slope | None) -> JSONObject | None:
    return None if s is None else asdict(s)


def _open_loop(reqs: list[RequestRecord], offered: float | None, server: JSONMapping | None) -> Verdict:
    """Achieved behind offered while the queue grew (module doc)."""
    reqs = sorted(reqs, key=lambda r: r.arrival_ns)
    n = len(reqs)
    if n < MIN_REQUESTS:
        return Verdict(None, f"cannot tell: {n} measured requests (a verdict needs {MIN_REQUESTS})", "open", offered)
    due = np.array([r.arrival_ns for r in reqs], dtype=float)
    ends = np.sort(np.array([_end_ns(r) for r in reqs], dtype=float))
    due_rate, achieved = _rank_rate(due), _rank_rate(ends)
    shown = offered if offered else due_rate
    if due_rate is None or achieved is None:
        return Verdict(None, "cannot tell: the requests were due all at once", "open", shown, achieved)
    t0 = due[0]
    fill_s = min(_end_ns(r) - r.send_ns for r in reqs[:3]) / NS  # the pipeline filling: an unqueued latency
    at = (due - t0) / NS
    keep = at >= at[0] + fill_s
    in_flight = np.arange(1, n + 1) - np.searchsorted(ends, due, side="right")
    grew = slope(at[keep], in_flight[keep]) if keep.sum() >= MIN_SAMPLES else None
    ttft = [
        (x, (ttft_ns(r) + r.send_ns - r.arrival_ns) / 1e6)
        for x, r in zip(at, reqs, strict=True)
        if ttft_ns(r) is not None
    ]
    ttft_slope = slope([p[0] for p in ttft], [p[1] for p in ttft]) if len(ttft) >= MIN_SAMPLES else None
    wx, wy = _series_points(server, "num_requests_waiting", t0, at[0] + fill_s, float(at[-1]))
    waiting = slope(wx, wy) if wx.size >= MIN_SAMPLES else None
    evidence = {
        "in_flight": _slope_dict(grew),
        "ttft": _slope_dict(ttft_slope),
        "server_waiting": _slope_dict(waiting),
        "due_rate": due_rate,
        "fill_s": fill_s,
    }
    if grew is None and waiting is None and ttft_slope is None:
        why = f"cannot tell: the requests were due over {at[-1]:.2g} s, too short beside their latency ({fill_s:.2g} s)"
        return Verdict(None, why, "open", shown, achieved, evidence)
    behind = achieved < BEHIND * due_rate
    queue = _queue_words(grew, waiting, ttft_slope)
    pace = (
        f"achieved {_g(achieved)} req/s {'<' if behind else 'kept up with'} offered {_offered_words(due_rate, offered)}"
    )
    if behind and any(s is not None and s.rising for s in (grew, waiting, ttft_slope)):
        return Verdict(True, f"{queue} while {pace}", "open", shown, achieved, evidence)
    if behind:
        return Verdict(
            False, f"{pace}, but the queue did not grow significantly ({queue})", "open", shown, achieved, evidence
        )
    return Verdict(False, f"{pace} ({queue})", "open", shown, achieved, evidence)


def _offered_words(due_rate: float, configured: float | None) -> str:
    """``10 req/s``, or ``11.6 req/s (configured 10)`` when the realised schedule differs by over 5 %."""
    words = f"{_g(due_rate)} req/s"
    if configured and abs(due_rate / configured - 1) > 0.05:
        words += f" (configured {_g(configured)})"
    return words


def _queue_words(grew: Slope | None, waiting: Slope | None, ttft: Slope | None) -> str:
    """``in-flight requests grew 2.1/s (95 % CI 1.6–2.6)``: the signals that rose first, then in-flight
    requests (or the first signal there is) when they did not."""
    signals = [
        ("in-flight requests", grew, "/s"),
        ("the server's waiting queue", waiting, "/s"),
        ("TTFT from the due time", ttft, " ms per s of the run"),
    ]
    present = [(name, s, unit) for name, s, unit in signals if s is not None]
    rising = [sig for sig in present if sig[1].rising]
    shown = rising + [sig for sig in present[:1] if sig not in rising]
    return "; ".join(f"{name} {'grew' if s.rising else 'changed'} {s.words(unit)}" for name, s, unit in shown)


def _closed_loop(reqs: list[RequestRecord], offered: float | None, server: JSONMapping | None) -> Verdict:
    """The server's own queue and KV cache during the phase (module doc); None without them."""
    n = len(reqs)
    at = f"at concurrency {_g(offered)}" if offered else "in a closed loop"
    if n < MIN_REQUESTS:
        return Verdict(None, f"cannot tell: {n} measured requests (a verdict needs {MIN_REQUESTS})", "closed", offered)
    ends = np.sort(np.array([_end_ns(r) for r in reqs], dtype=float))
    achieved = _rank_rate(ends)
    first = min(r.send_ns for r in reqs)
    span = (float(ends[-1]) - first) / NS
    _, waiting = _series_points(server, "num_requests_waiting", first, 0.0, span)
    _, kv = _series_points(server, "kv_cache_usage_perc", first, 0.0, span)
    _, preempted = _series_points(server, "num_preemptions_total", first, 0.0, span)
    share = float((waiting >= 1).mean()) if waiting.size >= 3 else None
    evidence = {
        "waiting_share": share,
        "waiting_mean": float(waiting.mean()) if waiting.size else None,
        "kv_cache_peak": float(kv.max()) if kv.size else None,
        "preemptions": float(preempted.max()) if preempted.size else None,
    }
    if (
        evidence["kv_cache_peak"] is not None
        and evidence["kv_cache_peak"] >= KV_FULL
        and (evidence["preemptions"] or 0) > 0
    ):
        why = f"the KV cache was full ({evidence['kv_cache_peak'] * 100:.0f} %) and {evidence['preemptions']:.0f} requests were preempted {at}"
        return Verdict(True, why, "closed", offered, achieved, evidence)
    if share is None:
        why = (
            f"cannot tell from one run {at} without the server's queue (no /metrics): judged against the previous load"
        )
        return Verdict(None, why, "closed", offered, achieved, evidence)
    queue = f"requests waited at the server in {share * 100:.0f} % of its samples (mean {evidence['waiting_mean']:.2g} waiting)"
    rate = f"achieved {_g(achieved)} req/s"
    return Verdict(share >= WAITING_SHARE, f"{queue} {at}; {rate}", "closed", offered, achieved, evidence)


def against_previous(
    verdict: Verdict, previous: tuple[float, float] | None, current: tuple[float, float] | None
) -> Verdict:
    """A closed-loop verdict that one run could not give, from the step since the sweep's previous point.

    ``previous`` and ``current``: (concurrency, requests/s) of the lower load and of this run.
    Saturated when throughput gained less than ``GAIN_FLOOR`` of the extra concurrency.
    """
    if verdict.saturated is not None or verdict.loop != "closed" or not previous or not current:
        return verdict
    (x0, r0), (x1, r1) = previous, current
    if not (x0 > 0 and r0 > 0 and x1 > x0):
        return verdict
    step, gain = x1 / x0 - 1, r1 / r0 - 1
    words = f"throughput rose {gain:+.0%} ({_g(r0)} → {_g(r1)} req/s) for {step:+.0%} concurrency ({_g(x0)} → {_g(x1)})"
    evidence = {**verdict.evidence, "previous": {"offered": x0, "requests_per_s": r0}, "requests_per_s": r1}
    saturated = gain < GAIN_FLOOR * step
    return Verdict(saturated, words, "closed", verdict.offered, verdict.achieved, evidence)


def side_record(
    load: JSONMapping, requests: Sequence[RequestRecord], server: JSONMapping | None
) -> dict[str, JSONObject]:
    """``{"saturation": verdict}`` for a serving run's side records, from its ``metrics["load"]``
    (arrival, configured rate, concurrency, a trace's schedule); {} for static batches."""
    arrival = load.get("arrival")
    if arrival in (None, "batch"):
        return {}
    offered = {CLOSED_LOOP: load.get("max_concurrency"), "trace": load.get("scheduled_rate")}.get(
        arrival, load.get("configured_rate")
    )
    return {RECORD: judge(requests, arrival, offered, server).to_dict()}
