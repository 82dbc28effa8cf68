"""Load curves of one rate or concurrency sweep (pure): offered against achieved load, latency, goodput, knee.

Built from the stored runs of one sweep (``python -m engine sweep``, a Launch load sweep,
the probes of an SLA search). Per run:

* **offered load**: the configured request rate (arrival ``poisson``/``gamma``) or the most
  requests in flight (arrival ``concurrency``), from the run's ``metrics["load"]`` or else
  its spec; arrival ``max`` (everything at once) is drawn after the highest finite load;
* **achieved**: requests/s completed (and ``load.achieved_rate``, requests sent per second),
  output tokens/s, per GPU where the run used GPUs, and tokens/s per user;
* TTFT and TPOT p50/p99 with their stored 95 % intervals, and the goodput fraction.

**The knee** (:func:`find_knee`): walking up the offered loads (done runs only), the first
*saturated* point is the first one where either

1. achieved stops tracking offered: less than half of the extra offered load became extra
   throughput, ``(thr_i / thr_{i-1} - 1) < 0.5 * (x_i / x_{i-1} - 1)``, or
2. latency rises steeply: TTFT p50 is more than twice its value at the lowest load.

The knee is the point just before it: the highest load that is still on the flat part of
the curve (the lowest point when the second is saturated already). No saturated point: no
knee ("still flat at the highest load").

**Saturation** is a different question, asked of each run alone (:mod:`engine.measure.saturation`:
did its queue grow while it fell behind the offered load?); every serving run stores its
verdict, shown per point. A sweep that stops at saturation (``--stop-at-saturation``, Launch's
load sweep) leaves a ``sweep_stop`` record on the run where it stopped: the curve's
:attr:`LoadCurve.stops` say where and why, and which points were not run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject

if TYPE_CHECKING:
    from engine.report.runlike import RunLike

GAIN_FLOOR = 0.5  # achieved must gain at least half of the extra offered load
LATENCY_RISE = 2.0  # TTFT p50 more than this many times its lowest-load value: steep
GROUPS: tuple[str, ...] = ("ttft_ms", "tpot_ms")
SATURATION_WORDS: dict[bool | None, str] = {True: "saturated", False: "no", None: "cannot tell"}
PCTS: tuple[str, ...] = ("p50", "p99")
Row = dict[str, str | float | None]  # one row of the page's table and exports


@dataclass(frozen=True)
class LoadPoint:
    """One run of the sweep at one offered load."""

    run_id: int
    name: str | None
    status: str
    arrival: str | None
    offered: float | None  # requests/s or requests in flight; inf for arrival "max"; None: unknown
    achieved_rate: float | None  # requests sent per second
    requests_per_s: float | None
    output_tokens_per_s: float | None
    output_tokens_per_s_per_gpu: float | None
    tokens_per_s_per_user: float | None
    goodput_fraction: float | None
    latency: dict[str, float | None] = field(default_factory=dict)  # "ttft_ms_p99" -> ms
    intervals: dict[str, list[float] | None] = field(default_factory=dict)  # "ttft_ms_p99" -> [lo, hi]
    slo: dict[str, float | None] = field(default_factory=dict)  # the run's goodput SLO (ms)
    error: str | None = None
    saturation: JSONObject | None = None  # the run's verdict (engine.measure.saturation); None: not judged

    @property
    def saturated(self) -> bool | None:
        """The run's verdict: True, False, or None (cannot tell, or not judged)."""
        return (self.saturation or {}).get("saturated")

    @property
    def ok(self) -> bool:
        return self.status == "done" and self.offered is not None


@dataclass(frozen=True)
class SweepStop:
    """Where a sweep that stops at saturation stopped: the run, its load, why, and the points not run
    (``{"point": "rate 16/s", "load": 16.0, "job_id": 12}``; ``load`` None: as fast as possible)."""

    run_id: int
    load: float | None
    because: str
    not_run: list[JSONObject]
    reason: str  # what each point not run says: ``not run: saturated at 8 req/s (run 12): ...``

    @property
    def not_run_words(self) -> str:
        """``rate 16/s, rate 32/s`` (``none`` when nothing was left)."""
        return ", ".join(str(p.get("point")) for p in self.not_run) or "none"


@dataclass(frozen=True)
class LoadCurve:
    """A sweep's points in order of offered load, its axis, and the knee."""

    sweep: str
    axis: str  # "rate" | "concurrency" | "mixed"
    points: list[LoadPoint]
    knee: LoadPoint | None
    knee_words: str
    stops: list[SweepStop] = field(default_factory=list)

    @property
    def unit(self) -> str:
        return {"rate": "req/s", "concurrency": "concurrent requests"}.get(self.axis, "load")

    def done(self) -> list[LoadPoint]:
        """The done points with a known offered load, in order."""
        return [p for p in self.points if p.ok]


def _offered(arrival: str | None, load: JSONMapping, workload: JSONMapping) -> float | None:
    if arrival in ("poisson", "gamma"):
        value = load.get("configured_rate") or workload.get("rate")
    elif arrival == "concurrency":
        value = load.get("max_concurrency") or workload.get("max_concurrency")
    elif arrival == "max":
        return math.inf
    else:
        return None
    return None if value is None else float(value)


def load_point(run: RunLike, saturation: JSONObject | None = None) -> LoadPoint:
    """One stored run (``storage.runs.RunDetail``-like: id, name, status, spec, metrics, error) as a point,
    with its saturation verdict (its ``saturation`` side record) where it has one."""
    metrics = run.metrics or {}
    load = metrics.get("load") or {}
    workload = (run.spec or {}).get("workload") or {}
    arrival = load.get("arrival") or workload.get("arrival")
    latency, intervals = {}, {}
    for group in GROUPS:
        stats = metrics.get(group) or {}
        for pct in PCTS:
            latency[f"{group}_{pct}"] = stats.get(pct)
            intervals[f"{group}_{pct}"] = (stats.get("ci") or {}).get(pct)
    return LoadPoint(
        run_id=int(run.id),
        name=run.name,
        status=run.status,
        arrival=arrival,
        offered=_offered(arrival, load, workload),
        achieved_rate=load.get("achieved_rate"),
        requests_per_s=metrics.get("requests_per_s"),
        output_tokens_per_s=metrics.get("output_tokens_per_s"),
        output_tokens_per_s_per_gpu=metrics.get("output_tokens_per_s_per_gpu"),
        tokens_per_s_per_user=metrics.get("tokens_per_s_per_user"),
        goodput_fraction=metrics.get("goodput_fraction"),
        latency=latency,
        intervals=intervals,
        slo=dict(metrics.get("slo") or {}),
        error=run.error,
        saturation=saturation if isinstance(saturation, dict) else None,
    )


def _axis(points: Sequence[LoadPoint]) -> str:
    kinds = {"rate" if p.arrival in ("poisson", "gamma") else p.arrival for p in points if p.arrival != "max"}
    kinds.discard(None)
    if kinds <= {"rate"}:
        return "rate"
    return "concurrency" if kinds == {"concurrency"} else "mixed"


def find_knee(points: Sequence[LoadPoint]) -> tuple[LoadPoint | None, str]:
    """The knee of done points in order of offered load, and the rule's verdict in words (module doc)."""
    done = [p for p in points if p.ok and math.isfinite(p.offered) and p.requests_per_s]
    if len(done) < 2:
        return None, "too few points for a knee (2 or more done runs at finite loads)"
    base_ttft = done[0].latency.get("ttft_ms_p50")
    for prev, cur in zip(done, done[1:], strict=False):
        why = _saturated(prev, cur, base_ttft)
        if why:
            return prev, f"knee at {prev.offered:g}: above it {why}"
    return None, f"no knee: still flat at the highest load ({done[-1].offered:g})"


def _saturated(prev: LoadPoint, cur: LoadPoint, base_ttft: float | None) -> str | None:
    """Why ``cur`` is past the knee (module doc), or None."""
    load_step = cur.offered / prev.offered - 1 if prev.offered else 0.0
    gain = cur.requests_per_s / prev.requests_per_s - 1 if prev.requests_per_s else 0.0
    if load_step > 0 and gain < GAIN_FLOOR * load_step:
        return f"throughput gained {gain:+.0%} for {load_step:+.0%} load at {cur.offered:g}"
    ttft = cur.latency.get("ttft_ms_p50")
    if base_ttft and ttft is not None and ttft > LATENCY_RISE * base_ttft:
        return f"TTFT p50 rose {ttft / base_ttft:.1f}x its lowest-load value at {cur.offered:g}"
    return None


def build_curve(
    sweep: str,
    runs: Sequence[RunLike],
    saturation: Mapping[int, JSONObject] | None = None,
    stops: Mapping[int, JSONMapping] | None = None,
) -> LoadCurve:
    """The load curve of a sweep's stored runs (any order; runs without a load are listed last), with
    each run's saturation verdict and the sweep's stop records, by run id, where there are some."""
    saturation, stops = saturation or {}, stops or {}
    points = sorted(
        (load_point(r, saturation.get(int(r.id))) for r in runs),
        key=lambda p: (p.offered is None, p.offered or 0.0, p.run_id),
    )
    knee, words = find_knee(points)
    found = [_stop(run_id, body) for run_id, body in sorted(stops.items())]
    return LoadCurve(
        sweep=sweep,
        axis=_axis(points),
        points=points,
        knee=knee,
        knee_words=words,
        stops=[s for s in found if s is not None],
    )


def _stop(run_id: int, body: JSONMapping) -> SweepStop | None:
    """A stored ``sweep_stop`` record as a :class:`SweepStop` (None when it is not one)."""
    because = body.get("stopped_because")
    if not isinstance(because, str):
        return None
    load = body.get("load")
    not_run = [p for p in body.get("not_run") or [] if isinstance(p, dict)]
    reason = body.get("reason") if isinstance(body.get("reason"), str) else f"not run: {because}"
    return SweepStop(int(run_id), float(load) if isinstance(load, (int, float)) else None, because, not_run, reason)


def slo_limits(curve: LoadCurve) -> dict[str, float]:
    """The goodput SLO the sweep's runs were measured against (``{"ttft_ms": 300, ...}``; the first run's)."""
    for p in curve.done():
        limits = {k: float(v) for k, v in p.slo.items() if v is not None}
        if limits:
            return limits
    return {}


def table(curve: LoadCurve) -> list[Row]:
    """One row per point for the page's table and exports."""
    rows = []
    for p in curve.points:
        row: Row = {
            "run": p.run_id,
            "offered": "as fast as possible" if p.offered == math.inf else p.offered,
            "sent/s": p.achieved_rate,
            "requests/s": p.requests_per_s,
            "output tok/s": p.output_tokens_per_s,
            "tok/s per user": p.tokens_per_s_per_user,
            "goodput": p.goodput_fraction,
            "knee": "◀ knee" if curve.knee is not None and p.run_id == curve.knee.run_id else "",
            "saturated": SATURATION_WORDS.get(p.saturated, "cannot tell") if p.saturation else "",
            "stopped": "◀ stopped" if any(s.run_id == p.run_id for s in curve.stops) else "",
            "status": p.status if p.status == "done" else f"{p.status}: {p.error or ''}",
        }
        for key, value in p.latency.items():
            row[key] = value
        rows.append(row)
    return rows


def not_run_rows(curve: LoadCurve) -> list[JSONObject]:
    """One row per point a stop left unrun: the point, the job that was not run, and why."""
    return [
        {"point": p.get("point"), "job": p.get("job_id"), "reason": stop.reason}
        for stop in curve.stops
        for p in stop.not_run
    ]
