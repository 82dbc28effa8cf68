"""Time series over one run from its raw stamps: output tokens/s in 1 s windows, requests in
flight, TTFT per request and ITL per token over time, each scatter with a rolling median.

Pure functions of :class:`RequestRecord` lists (measured requests only; warm-up left out);
times are seconds since the first measured send. With several trials (or adaptive rounds)
the series run on one clock and :func:`repeat_starts` says where each trial began.
Labels and units come from the metric registry.

The Run page draws from a run's aggregates (:mod:`engine.measure.aggregates`, :func:`over_time_figure`),
never from every stamp: up to :data:`MAX_POINTS` points a panel shows every point (the same figure as
from the requests); beyond, the panel's title says what it shows instead (TTFT: every k-th request;
ITL: a sample of gaps and the median per time bin; requests in flight: the most in each time bin).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.measure import registry
from engine.measure.aggregates import Aggregates, summarise, thin_positions, windowed_rate
from engine.measure.aggregates import rolling_median as rolling_median
from engine.measure.metrics import NS_PER_MS, itl_gaps_ns, ttft_ns
from engine.measure.records import RequestRecord
from engine.measure.registry import GROUP_LABELS
from engine.report.distributions import count_step

NS_PER_S = 1_000_000_000
WINDOW_S = 1.0
MAX_POINTS = 5000  # scatter points per panel; more are thinned evenly (the rolling median uses them all)


@dataclass(frozen=True)
class Series:
    """Points over time: ``t`` in s since the first measured send, ``y`` in the series' unit."""

    t: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return int(self.t.size)


def measured(requests: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The measured requests (warm-up left out)."""
    return [r for r in requests if not r.warmup]


def start_ns(requests: Sequence[RequestRecord]) -> int | None:
    """The run's clock origin: the first measured send (None when nothing was measured)."""
    runs = measured(requests)
    return min(r.send_ns for r in runs) if runs else None


def _token_stamps(r: RequestRecord) -> list[tuple[int, int]]:
    return [(t, n) for t, n in zip(r.chunk_ns, r.chunk_tokens, strict=True) if n > 0]


def tokens_per_s(requests: Sequence[RequestRecord], window_s: float = WINDOW_S) -> Series:
    """Output tokens of successful measured requests per ``window_s`` window, as tokens/s.

    ``t`` is each window's start; the last window is scaled by its covered length, so a run
    that ends 0.2 s into a window does not read as a drop.
    """
    t0 = start_ns(requests)
    stamps = [(t, n) for r in measured(requests) if r.ok for t, n in _token_stamps(r)]
    if t0 is None or not stamps:
        return Series(np.zeros(0), np.zeros(0))
    times = np.array([(t - t0) / NS_PER_S for t, _ in stamps])
    return Series(*windowed_rate(times, np.array([n for _, n in stamps], dtype=float), window_s))


def in_flight(requests: Sequence[RequestRecord]) -> Series:
    """Requests in flight (sent, last chunk not yet back) as a step series: +1 at send, -1 at the end."""
    t0 = start_ns(requests)
    events: list[tuple[int, int]] = []
    for r in measured(requests):
        end = max([r.send_ns, *r.chunk_ns])
        events += [(r.send_ns, 1), (end, -1)]
    if t0 is None or not events:
        return Series(np.zeros(0), np.zeros(0))
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a send at the same stamp
    t = np.array([(e[0] - t0) / NS_PER_S for e in events])
    return Series(t, np.cumsum([e[1] for e in events]).astype(float))


def ttft_over_time(requests: Sequence[RequestRecord]) -> Series:
    """Each successful measured request's TTFT [ms], at the time it was sent."""
    t0 = start_ns(requests)
    pts = [(r.send_ns, v) for r in measured(requests) if r.ok and (v := ttft_ns(r)) is not None]
    pts.sort()
    if t0 is None or not pts:
        return Series(np.zeros(0), np.zeros(0))
    return Series(np.array([(s - t0) / NS_PER_S for s, _ in pts]), np.array([v / NS_PER_MS for _, v in pts]))


def itl_over_time(requests: Sequence[RequestRecord]) -> Series:
    """Every gap between consecutive token-bearing chunks [ms], at the time the later chunk came."""
    t0 = start_ns(requests)
    pts: list[tuple[int, int]] = []
    for r in measured(requests):
        if not r.ok:
            continue
        stamps = [t for t, _ in _token_stamps(r)]
        pts += list(zip(stamps[1:], itl_gaps_ns(r), strict=False))
    pts.sort()
    if t0 is None or not pts:
        return Series(np.zeros(0), np.zeros(0))
    return Series(np.array([(s - t0) / NS_PER_S for s, _ in pts]), np.array([g / NS_PER_MS for _, g in pts]))


def repeat_starts(requests: Sequence[RequestRecord]) -> list[tuple[int, float]]:
    """(trial, s since the first send) where each trial after the first began; [] for one trial."""
    t0 = start_ns(requests)
    firsts: dict[int, int] = {}
    for r in measured(requests):
        firsts[r.trial] = min(firsts.get(r.trial, r.send_ns), r.send_ns)
    if t0 is None or len(firsts) < 2:
        return []
    return sorted((trial, (ns - t0) / NS_PER_S) for trial, ns in firsts.items() if ns > t0)


def _thin(series: Series, limit: int | None = None) -> Series:
    keep = thin_positions(len(series), limit or MAX_POINTS)
    return series if keep.size == len(series) else Series(series.t[keep], series.y[keep])


def _scatter_with_median(fig: go.Figure, points: Series, median: Series, row: int, name: str, color: str) -> None:
    fig.add_trace(
        go.Scattergl(
            x=points.t,
            y=points.y,
            mode="markers",
            name=name,
            marker={"size": 4, "color": color, "opacity": 0.45},
            hovertemplate="%{x:.2f} s: %{y:.2f} ms<extra>" + name + "</extra>",
        ),
        row=row,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=median.t, y=median.y, mode="lines", name=f"{name} median", line={"color": "black"}),
        row=row,
        col=1,
    )


@dataclass(frozen=True)
class Panels:
    """What the four panels draw, and the words that say when a panel shows less than every point."""

    rate: Series
    flight: Series
    ttft: tuple[Series, Series]  # points, median line
    itl: tuple[Series, Series]
    starts: list[tuple[int, float]]
    notes: tuple[str, str, str] = ("", "", "")  # in flight, TTFT, ITL


def _flight(agg: Aggregates) -> tuple[Series, str]:
    """Requests in flight from the aggregates: every step, or the most in each of (at most) 2,000 time bins."""
    c, m = agg.columns, agg.mask()
    ends = np.where(c["has_chunks"][m] == 1, np.maximum(c["last_chunk"][m], c["send"][m]), c["send"][m])
    t = np.concatenate([c["send"][m], ends]) / NS_PER_S
    d = np.concatenate([np.ones(int(m.sum())), -np.ones(int(m.sum()))])
    order = np.lexsort((d, t))  # an end before a send at the same stamp
    steps = Series(t[order], np.cumsum(d[order]))
    if len(steps) <= 2 * MAX_POINTS or steps.t[-1] <= steps.t[0]:
        return steps, ""
    width = (steps.t[-1] - steps.t[0]) / min(2000, MAX_POINTS)
    which = ((steps.t - steps.t[0]) / width).astype(np.int64)
    edges = np.flatnonzero(np.diff(which)) + 1
    most = np.maximum.reduceat(steps.y, np.r_[0, edges])
    return Series(steps.t[np.r_[0, edges]], most), f" (the most in each {width:.2g} s)"


def _ttft(agg: Aggregates) -> tuple[tuple[Series, Series], str]:
    c, m = agg.columns, agg.mask(ok=True)
    send, ttft = c["send"][m], c["first_token"][m] - c["send"][m]
    order = np.lexsort((ttft, send))
    pts = Series(send[order] / NS_PER_S, ttft[order] / NS_PER_MS)
    shown = _thin(pts)
    note = f" ({len(shown):,} of {len(pts):,}, evenly spread)" if len(shown) < len(pts) else ""
    return (shown, _thin(Series(pts.t, rolling_median(pts.y)))), note


def _itl(agg: Aggregates) -> tuple[tuple[Series, Series], str]:
    over = agg.itl.get("over_time") or {}

    def series(t: str, y: str) -> Series:
        return Series(np.asarray(over.get(t) or [], dtype=float), np.asarray(over.get(y) or [], dtype=float))

    points, median = series("t", "y"), series("median_t", "median_y")
    if not over.get("binned"):
        return (_thin(points), _thin(median)), ""
    return (points, median), f" ({len(points):,} of {over['n']:,} sampled; median per {over['bin_s']:.2g} s)"


def panels_of(agg: Aggregates) -> Panels:
    """The four panels of a run's aggregates (module doc)."""
    c, m = agg.columns, agg.mask()
    trials, sends = c["trial"][m], c["send"][m]
    firsts = {int(k): int(sends[trials == k].min()) for k in np.unique(trials)}
    starts = sorted((k, v / NS_PER_S) for k, v in firsts.items() if v > 0) if len(firsts) > 1 else []
    rate = Series(np.asarray(agg.tokens_per_s.get("t") or []), np.asarray(agg.tokens_per_s.get("y") or []))
    flight, flight_note = _flight(agg)
    ttft, ttft_note = _ttft(agg)
    itl, itl_note = _itl(agg)
    return Panels(rate, flight, ttft, itl, starts, (flight_note, ttft_note, itl_note))


def timeseries_figure(requests: Sequence[RequestRecord], window_s: float = WINDOW_S) -> go.Figure:
    """Four panels on one time axis: output tokens/s, requests in flight, TTFT and ITL over time."""
    return over_time_figure(summarise(requests), window_s)


def over_time_figure(agg: Aggregates, window_s: float | None = None) -> go.Figure:
    """:func:`timeseries_figure` drawn from a run's aggregates (its windows are the aggregates' own)."""
    p = panels_of(agg)
    window_s = float(agg.tokens_per_s.get("window_s") or WINDOW_S) if window_s is None else window_s
    rate = registry.lookup("output_tokens_per_s")
    titles = (
        f"{rate.label} in {window_s:g} s windows",
        f"requests in flight{p.notes[0]}",
        f"{GROUP_LABELS['ttft_ms']} per request{p.notes[1]}",
        f"{GROUP_LABELS['itl_ms']} per token{p.notes[2]}",
    )
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.07)
    fig.add_trace(
        go.Scatter(x=p.rate.t, y=p.rate.y, mode="lines", line={"shape": "hv", "color": "#1f77b4"}, name=rate.label),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=p.flight.t, y=p.flight.y, mode="lines", line={"shape": "hv", "color": "#7f7f7f"}, name="in flight"
        ),
        row=2,
        col=1,
    )
    _scatter_with_median(fig, *p.ttft, 3, "TTFT", "#ff7f0e")
    _scatter_with_median(fig, *p.itl, 4, "ITL", "#2ca02c")
    for trial, at in p.starts:
        fig.add_vline(x=at, line={"dash": "dot", "color": "#999"}, annotation_text=f"trial {trial}")
    _axes(fig, rate.display_unit, p.flight)
    return fig


def _axes(fig: go.Figure, unit: str, flight: Series) -> None:
    fig.update_yaxes(title_text=f"[{unit}]", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(
        title_text="requests",
        rangemode="tozero",
        tickformat="d",
        dtick=count_step(float(flight.y.max()) if len(flight) else 1.0),
        row=2,
        col=1,
    )
    fig.update_yaxes(title_text="[ms]", rangemode="tozero", row=3, col=1)
    fig.update_yaxes(title_text="[ms]", rangemode="tozero", row=4, col=1)
    fig.update_xaxes(title_text="time since the first measured request [s]", row=4, col=1)
    fig.update_layout(
        title="Over the run", template="plotly_white", height=900, showlegend=False, margin={"t": 60, "b": 40}
    )


def _duration_s(requests: Sequence[RequestRecord]) -> float:
    t0 = start_ns(requests)
    ends = [max(r.chunk_ns) for r in measured(requests) if r.chunk_ns]
    return 0.0 if t0 is None or not ends else (max(ends) - t0) / NS_PER_S


def throughput_overlay(requests_by_name: dict[str, Sequence[RequestRecord]], max_windows: int = 300) -> go.Figure:
    """Output tokens/s over time, one line per named run (the report's over-time chart).

    Windows are 1 s, or whole seconds long enough that the longest run has at most
    ``max_windows`` of them (so a report of long runs stays small).
    """
    from engine.report.figures import PALETTE

    rate = registry.lookup("output_tokens_per_s")
    longest = max((_duration_s(r) for r in requests_by_name.values()), default=0.0)
    window_s = max(WINDOW_S, float(math.ceil(longest / max_windows)))
    fig = go.Figure()
    for i, (name, requests) in enumerate(requests_by_name.items()):
        series = tokens_per_s(requests, window_s)
        if len(series):
            fig.add_trace(
                go.Scatter(
                    x=series.t.astype(np.float32),
                    y=series.y.astype(np.float32),
                    mode="lines",
                    name=name,
                    line={"shape": "hv", "color": PALETTE[i % 10]},
                )
            )
    fig.update_layout(
        title=f"{rate.label} over the run ({window_s:g} s windows)",
        xaxis_title="time since the first measured request [s]",
        yaxis_title=rate.header,
        yaxis_rangemode="tozero",
        template="plotly_white",
    )
    return fig
