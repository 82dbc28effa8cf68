"""History of one spec fingerprint: a metric over time, its intervals, and the change points.

Every done run of a fingerprint is one point, oldest first. A point's band is the run's
stored 95 % interval (``metrics[group]["ci"][stat]`` for a latency statistic,
``metrics["ci"][key]`` for a scalar) or, for accuracy, value ± 1.96 standard errors; runs
stored before intervals existed have no band. Change points are found by ``ruptures``
(the exact penalised least-squares segmentation, as PELT with an l2 cost finds it, computed by
``KernelCPD(kernel="linear")`` in C: milliseconds for 500 runs where the Python PELT took seconds;
segments of at least 2 runs) with a penalty of
``5 * sigma**2 * log(n)``, sigma estimated robustly from successive differences (about 3 %
false alarms on a pure-noise series of 8-40 runs, a 3-sigma step found 9 times in 10).
Each change point is marked with what changed between the last run before it and the first
after it: git commit, package versions, device, host (from their provenance). Predicted runs (the serving
simulator's) are never in a series, even when they share the fingerprint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from engine.measure import registry
from engine.report.figures import PALETTE
from engine.report.runlike import is_predicted
from engine.report.values import accuracy_stderr, band_of, flat_metrics, run_hints, stored_interval

if TYPE_CHECKING:
    from engine.report.runlike import Measured
    from storage import Database
    from storage.runs import RunDetail

__all__ = [  # the bands live in engine.report.values (Explore's fronts read them too); named here as before
    "ChangePoint",
    "History",
    "Point",
    "accuracy_stderr",
    "band_of",
    "build_history",
    "change_points",
    "fingerprint_runs",
    "history",
    "history_figure",
    "measured_metrics",
    "metric_choices",
    "stored_interval",
    "what_changed",
]
MIN_SEGMENT = 2
PENALTY_FACTOR = 5.0
FIRST_METRICS = ("tpot_ms_p50", "ttft_ms_p50", "output_tokens_per_s", "itl_ms_p50", "e2el_ms_p50")
# offered even when no run of the series measured them (the page then says how to measure them)
ACCURACY_METRICS = ("quality.perplexity", "quality.kl_mean", "quality.top1_agreement", "quality.greedy_flip_rate")
_SHOWN_KINDS = ("latency", "throughput", "accuracy", "memory")


# -- change points -------------------------------------------------------------------------
def change_points(values: Sequence[float], min_size: int = MIN_SEGMENT) -> list[int]:
    """Indices where a new segment starts (penalised l2 segmentation, ruptures KernelCPD linear); [] when too short."""
    import numpy as np
    import ruptures as rpt

    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if n < 2 * min_size:
        return []
    # noise from successive differences (a step moves one of them only): median |d| = 0.6745 * sqrt(2) * sigma
    sigma = float(np.median(np.abs(np.diff(x)))) / 0.6745 / math.sqrt(2.0)
    sigma = max(sigma, 1e-3 * max(float(np.median(np.abs(x))), 1e-12))  # a flat series: steps over ~0.5 % count
    penalty = PENALTY_FACTOR * sigma**2 * math.log(n)
    ends = rpt.KernelCPD(kernel="linear", min_size=min_size).fit(x.reshape(-1, 1)).predict(pen=penalty)
    return [int(e) for e in ends[:-1]]


def what_changed(before: RunDetail, after: RunDetail) -> list[str]:
    """What differs between two runs' provenance: git commit, package versions, device, host, Python."""
    pa, pb = getattr(before, "provenance", None) or {}, getattr(after, "provenance", None) or {}
    out = []
    if pa.get("git_commit") != pb.get("git_commit"):
        out.append(f"git {pa.get('git_commit') or '?'} → {pb.get('git_commit') or '?'}")
    packages_a, packages_b = pa.get("packages") or {}, pb.get("packages") or {}
    for name in sorted(set(packages_a) | set(packages_b)):
        if packages_a.get(name) != packages_b.get(name):
            out.append(f"{name} {packages_a.get(name) or '–'} → {packages_b.get(name) or '–'}")
    device_a, device_b = getattr(before, "device_name", None), getattr(after, "device_name", None)
    if device_a != device_b:
        out.append(f"device {device_a or '?'} → {device_b or '?'}")
    for key in ("host", "python", "cpu"):
        if pa.get(key) != pb.get(key):
            out.append(f"{key} {pa.get(key) or '?'} → {pb.get(key) or '?'}")
    return out


# -- a series ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One run of the series."""

    run_id: int
    at: datetime
    value: float
    band: tuple[float, float] | None


@dataclass(frozen=True)
class ChangePoint:
    """A level change: the runs either side of it, the segment means and what changed between them."""

    index: int  # position in History.points of the first run after the change
    before_run: int
    after_run: int
    at: datetime
    before_mean: float
    after_mean: float
    changes: list[str]

    @property
    def change_pct(self) -> float | None:
        return None if self.before_mean == 0 else (self.after_mean / self.before_mean - 1.0) * 100.0

    def words(self) -> str:
        what = (
            "; ".join(self.changes)
            if self.changes
            else "nothing recorded changed (load, noise or an unrecorded change)"
        )
        pct = self.change_pct
        size = "" if pct is None else f"{pct:+.1f} % "
        return f"{size}between run {self.before_run} and run {self.after_run}: {what}"


@dataclass(frozen=True)
class History:
    """One metric of one fingerprint over time."""

    fingerprint: str
    metric: str
    label: str
    points: list[Point]
    change_points: list[ChangePoint] = field(default_factory=list)
    skipped: int = 0  # runs of the fingerprint without this metric

    @property
    def has_bands(self) -> bool:
        return any(p.band is not None for p in self.points)


def build_history(fingerprint: str, metric: str, runs: Sequence[RunDetail]) -> History:
    """The series of ``metric`` over ``runs`` (done runs of one fingerprint, any order) and its change points.
    A predicted run is never a point: a series is measured (storage's fingerprint queries list measured runs only;
    one handed in anyway is left out, not counted as skipped)."""
    ordered = sorted((r for r in runs if not is_predicted(r)), key=lambda r: (r.created_at, r.id))
    points, kept, hints = [], [], {}
    for run in ordered:
        hints.update(run_hints(run))
        value = flat_metrics(run).get(metric)
        if value is None:
            continue
        points.append(Point(run.id, run.created_at, value, band_of(run, metric, value)))
        kept.append(run)
    values = [p.value for p in points]
    bounds = [0, *change_points(values), len(values)]
    cps = []
    for k, start in enumerate(bounds[1:-1], start=1):
        before, after = values[bounds[k - 1] : start], values[start : bounds[k + 1]]
        cps.append(
            ChangePoint(
                start,
                points[start - 1].run_id,
                points[start].run_id,
                points[start].at,
                sum(before) / len(before),
                sum(after) / len(after),
                what_changed(kept[start - 1], kept[start]),
            )
        )
    label = registry.lookup(metric, hints.get(metric)).header
    return History(fingerprint, metric, label, points, cps, skipped=len(ordered) - len(points))


def fingerprint_runs(db: Database, fingerprint: str, limit: int = 500) -> list[RunDetail]:
    """The stored done runs of ``fingerprint`` (the newest ``limit``), oldest first."""
    from storage.runs import get_runs
    from storage.suites import fingerprint_run_ids

    return get_runs(db, fingerprint_run_ids(db, fingerprint, limit))  # one query (index fingerprint, status, id)


def history(db: Database, fingerprint: str, metric: str, limit: int = 500) -> History:
    """:func:`build_history` over the stored done runs of ``fingerprint`` (the newest ``limit``)."""
    return build_history(fingerprint, metric, fingerprint_runs(db, fingerprint, limit))


def measured_metrics(runs: Sequence[Measured]) -> dict[str, None]:
    """The latency, throughput, accuracy and memory figures any of ``runs`` measured, in registry order."""
    present: dict[str, None] = {}
    for run in runs:
        hints = run_hints(run)
        for key, value in flat_metrics(run).items():
            if value is not None and registry.lookup(key, hints.get(key)).kind in _SHOWN_KINDS:
                present[key] = None
    return present


def metric_choices(runs: Sequence[Measured]) -> list[str]:
    """Metrics to follow over ``runs``: the headline latency ones, then accuracy (the measured ones, and the main
    ones even when no run measured them), then every other latency, throughput and memory figure measured."""
    present = measured_metrics(runs)
    first = [k for k in FIRST_METRICS if k in present]
    accuracy = [k for k in present if k.startswith("quality.")]
    accuracy += [k for k in ACCURACY_METRICS if k not in accuracy]
    return first + accuracy + [k for k in present if k not in first and k not in accuracy]


def _add_bands(fig: go.Figure, points: list[Point]) -> None:
    banded = [p for p in points if p.band is not None]
    if not banded:
        return
    xs = [p.at for p in banded]
    fig.add_trace(go.Scatter(x=xs, y=[p.band[1] for p in banded], mode="lines", line={"width": 0}, showlegend=False))
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[p.band[0] for p in banded],
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor="rgba(31,119,180,0.2)",
            name="95 % interval",
        )
    )


def _add_segments(fig: go.Figure, h: History) -> None:
    """A dotted line at each segment's mean, and a dashed line at each change point, labelled with what changed."""
    xs = [p.at for p in h.points]
    bounds = [0, *(c.index for c in h.change_points), len(h.points)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        mean = sum(p.value for p in h.points[a:b]) / max(b - a, 1)
        line = {"color": PALETTE[1], "dash": "dot"}
        fig.add_trace(
            go.Scatter(x=xs[a:b], y=[mean] * (b - a), mode="lines", showlegend=a == 0, name="segment mean", line=line)
        )
    for c in h.change_points:
        fig.add_shape(
            type="line", x0=c.at, x1=c.at, yref="paper", y0=0, y1=1, line={"color": PALETTE[3], "dash": "dash"}
        )
        text = ("; ".join(c.changes) or "change")[:60]
        fig.add_annotation(
            x=c.at, yref="paper", y=1.0, yanchor="bottom", showarrow=False, text=text, font={"color": PALETTE[3]}
        )


def _error_bars(points: list[Point]) -> dict[str, object]:
    """Each run's own 95 % interval as an error bar (one run has no band to fill, but has its interval)."""
    up = [p.band[1] - p.value if p.band else 0.0 for p in points]
    down = [p.value - p.band[0] if p.band else 0.0 for p in points]
    return {"type": "data", "array": up, "arrayminus": down, "visible": any(p.band for p in points), "thickness": 1.5}


def history_figure(h: History, series: str | None = None) -> go.Figure:
    """The series with its 95 % bands and each run's interval as an error bar, segment means and a marked line at
    each change point; ``series`` names it in the title. One run gets a day-wide time axis, not a sub-millisecond one."""
    fig = go.Figure()
    _add_bands(fig, h.points)
    fig.add_trace(
        go.Scatter(
            x=[p.at for p in h.points],
            y=[p.value for p in h.points],
            mode="lines+markers",
            name=h.label,
            line={"color": PALETTE[0]},
            error_y=_error_bars(h.points),
            customdata=[p.run_id for p in h.points],
            hovertemplate="run %{customdata}<br>%{x}<br>%{y:.4g}<extra></extra>",
        )
    )
    _add_segments(fig, h)
    fig.update_layout(
        title=f"{h.label} over time" + (f": {series}" if series else ""),
        xaxis_title="run time",
        yaxis_title=h.label,
        template="plotly_white",
    )
    times = [p.at for p in h.points]
    if len(set(times)) == 1:  # one run: plotly would zoom its time axis to a millisecond
        fig.update_xaxes(range=[min(times) - timedelta(hours=12), max(times) + timedelta(hours=12)])
    return fig
