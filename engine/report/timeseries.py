"""Time series over one run from its raw stamps: output tokens/s in 1 s windows, requests in
flight, TTFT per request and ITL per token over time, each scatter with a rolling median.

Pure functions of :class:`RequestRecord` lists (measured requests only; warm-up left out);
times are seconds since the first measured send. With several trials (or adaptive rounds)
the series run on one clock and :func:`repeat_starts` says where each trial began.
Labels and units come from the metric registry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.measure import registry
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
    counts = np.array([n for _, n in stamps], dtype=float)
    end = float(times.max())
    n_windows = max(1, math.ceil(end / window_s))  # the last edge is inclusive
    edges = np.arange(n_windows + 1) * window_s
    sums, _ = np.histogram(times, bins=edges, weights=counts)
    widths = np.full(n_windows, window_s)
    widths[-1] = max(end - edges[-2], window_s * 0.05)
    return Series(edges[:-1], sums / widths)


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


def rolling_median(values: np.ndarray, window: int | None = None) -> np.ndarray:
    """Centred rolling median over ``window`` points (default: a twentieth of the series, 5 to 501)."""
    n = int(values.size)
    if n == 0:
        return values.astype(float)
    k = window or min(501, max(5, n // 20))
    return pd.Series(values, dtype=float).rolling(k, center=True, min_periods=1).median().to_numpy()


def repeat_starts(requests: Sequence[RequestRecord]) -> list[tuple[int, float]]:
    """(trial, s since the first send) where each trial after the first began; [] for one trial."""
    t0 = start_ns(requests)
    firsts: dict[int, int] = {}
    for r in measured(requests):
        firsts[r.trial] = min(firsts.get(r.trial, r.send_ns), r.send_ns)
    if t0 is None or len(firsts) < 2:
        return []
    return sorted((trial, (ns - t0) / NS_PER_S) for trial, ns in firsts.items() if ns > t0)


def _thin(series: Series, limit: int = MAX_POINTS) -> Series:
    if len(series) <= limit:
        return series
    keep = np.unique(np.linspace(0, len(series) - 1, limit).round().astype(int))
    return Series(series.t[keep], series.y[keep])


def _scatter_with_median(fig: go.Figure, series: Series, row: int, name: str, color: str) -> None:
    shown = _thin(series)
    fig.add_trace(
        go.Scattergl(
            x=shown.t,
            y=shown.y,
            mode="markers",
            name=name,
            marker={"size": 4, "color": color, "opacity": 0.45},
            hovertemplate="%{x:.2f} s: %{y:.2f} ms<extra>" + name + "</extra>",
        ),
        row=row,
        col=1,
    )
    median = _thin(Series(series.t, rolling_median(series.y)))
    fig.add_trace(
        go.Scatter(x=median.t, y=median.y, mode="lines", name=f"{name} rolling median", line={"color": "black"}),
        row=row,
        col=1,
    )


def timeseries_figure(requests: Sequence[RequestRecord], window_s: float = WINDOW_S) -> go.Figure:
    """Four panels on one time axis: output tokens/s, requests in flight, TTFT and ITL over time."""
    rate = registry.lookup("output_tokens_per_s")
    titles = (
        f"{rate.label} in {window_s:g} s windows",
        "requests in flight",
        f"{GROUP_LABELS['ttft_ms']} per request",
        f"{GROUP_LABELS['itl_ms']} per token",
    )
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.07)
    tps = tokens_per_s(requests, window_s)
    fig.add_trace(
        go.Scatter(x=tps.t, y=tps.y, mode="lines", line={"shape": "hv", "color": "#1f77b4"}, name=rate.label),
        row=1,
        col=1,
    )
    flight = in_flight(requests)
    fig.add_trace(
        go.Scatter(x=flight.t, y=flight.y, mode="lines", line={"shape": "hv", "color": "#7f7f7f"}, name="in flight"),
        row=2,
        col=1,
    )
    _scatter_with_median(fig, ttft_over_time(requests), 3, "TTFT", "#ff7f0e")
    _scatter_with_median(fig, itl_over_time(requests), 4, "ITL", "#2ca02c")
    for trial, at in repeat_starts(requests):
        fig.add_vline(x=at, line={"dash": "dot", "color": "#999"}, annotation_text=f"trial {trial}")
    fig.update_yaxes(title_text=f"[{rate.display_unit}]", rangemode="tozero", row=1, col=1)
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
    return fig


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
