"""Distribution figures of one or more runs' raw stamps: CDFs, histograms, the per-request timeline.

Pure functions of :class:`RequestRecord` lists; no Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from engine.measure.metrics import NS_PER_MS, itl_gaps_ns, tpot_ns, ttft_ns
from engine.measure.records import RequestRecord
from engine.measure.registry import GROUP_LABELS
from engine.report.figures import PALETTE


def latency_samples(requests: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """Per-request TTFT and TPOT and pooled ITL gaps in ms (measured, successful requests)."""
    ok = [r for r in requests if not r.warmup and r.ok]
    return {
        "ttft_ms": [v / NS_PER_MS for r in ok if (v := ttft_ns(r)) is not None],
        "tpot_ms": [v / NS_PER_MS for r in ok if (v := tpot_ns(r)) is not None],
        "itl_ms": [g / NS_PER_MS for r in ok for g in itl_gaps_ns(r)],
    }


def cdf_figure(series: dict[str, Sequence[float]], metric: str) -> go.Figure:
    """Empirical CDFs of one metric (ms), one line per named series (overlaid for Compare)."""
    fig = go.Figure()
    fig.update_layout(
        title=f"{GROUP_LABELS.get(metric, metric)} CDF",
        xaxis_title=f"{GROUP_LABELS.get(metric, metric)} [ms]",
        yaxis_title="fraction of samples ≤ x",
        yaxis_range=[0, 1.02],
        template="plotly_white",
    )
    for i, (name, values) in enumerate(series.items()):
        vals = sorted(float(v) for v in values)
        if not vals:
            continue
        n = len(vals)
        fig.add_trace(
            go.Scatter(
                x=vals,
                y=[(k + 1) / n for k in range(n)],
                mode="lines",
                line={"shape": "hv", "color": PALETTE[i % 10]},
                name=f"{name} (n={n})",
                hovertemplate="%{x:.3f} ms: %{y:.1%}<extra>" + name + "</extra>",
            )
        )
    return fig


def histogram_figure(values: Sequence[float], metric: str, bins: int = 30) -> go.Figure:
    """Histogram of one metric's samples in ms."""
    name = GROUP_LABELS.get(metric, metric)
    fig = go.Figure(go.Histogram(x=[float(v) for v in values], nbinsx=bins, name=name, marker={"color": PALETTE[0]}))
    fig.update_layout(
        title=f"{name} histogram (n={len(values)})",
        xaxis_title=f"{name} [ms]",
        yaxis_title="count",
        template="plotly_white",
        bargap=0.05,
    )
    return fig


Phases = dict[str, tuple[list[float], list[float], list[str], list[str]]]  # phase -> (starts, lengths, rows, hover)


def _spans(r: RequestRecord) -> list[tuple[str, int, int]]:
    """A request's (phase, start ns, end ns): queued, to first token, decoding, and a failure mark."""
    tokens = [t for t, n in zip(r.chunk_ns, r.chunk_tokens, strict=True) if n > 0]
    spans = [("queued", r.arrival_ns, r.send_ns)]
    if tokens:
        spans += [("to first token", r.send_ns, tokens[0]), ("decoding", tokens[0], tokens[-1])]
    if not r.ok:
        end = tokens[-1] if tokens else r.send_ns
        spans.append(("failed", end, end + 1))
    return spans


def _timeline_phases(requests: Sequence[RequestRecord]) -> Phases:
    """The bars of every phase, in ms since the earliest stamp of the run."""
    t0 = min(min(r.arrival_ns, r.send_ns) for r in requests)

    def ms(t: int) -> float:
        return (t - t0) / NS_PER_MS

    phases: Phases = {k: ([], [], [], []) for k in ("queued", "to first token", "decoding", "failed")}
    for r in requests:
        label = f"#{r.index}" + (" (warm-up)" if r.warmup else "")
        for phase, a, b in _spans(r):
            if b < a:
                continue
            base, length, ys, hover = phases[phase]
            base.append(ms(a))
            length.append(max(ms(b) - ms(a), 0.0))
            ys.append(label)
            hover.append(
                f"{label} {phase}: {ms(a):.1f} → {ms(b):.1f} ms" + (f" ({r.error})" if phase == "failed" else "")
            )
    return phases


def timeline_figure(requests: Sequence[RequestRecord]) -> go.Figure:
    """Per-request timeline: queued (due → sent), to first token, decoding (first → last token).

    Times are ms since the earliest stamp of the run; failed requests end with a red mark.
    """
    fig = go.Figure()
    fig.update_layout(
        title="Per-request timeline",
        barmode="overlay",
        template="plotly_white",
        xaxis_title="time since start [ms]",
        yaxis_title="request",
        yaxis_autorange="reversed",
        legend_orientation="h",
        height=max(300, min(1200, 40 + 18 * len(requests))),
    )
    if not requests:
        return fig
    colours = {"queued": "#bbbbbb", "to first token": "#ff7f0e", "decoding": "#1f77b4", "failed": "#d62728"}
    for phase, (base, length, ys, hover) in _timeline_phases(requests).items():
        if not ys:
            continue
        fig.add_trace(
            go.Bar(
                base=base,
                x=length,
                y=ys,
                orientation="h",
                name=phase,
                marker_color=colours[phase],
                hovertext=hover,
                hoverinfo="text",
            )
        )
    return fig
