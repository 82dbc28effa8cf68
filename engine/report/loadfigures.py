"""Load-curve figures of one sweep (plotly, pure): latency against load, and per-user against per-GPU throughput.

* :func:`latency_figure`: TTFT or TPOT p50 and p99 (with their 95 % intervals as error bars)
  against offered load or achieved throughput; the SLO as a horizontal line, the goodput
  fraction on a second axis, the knee marked, an SLA answer (its bracket) as a band, the runs
  judged saturated as red crosses and where a sweep stopped at saturation as a red line.
* :func:`pareto_figure`: tokens/s per user against output tokens/s per GPU (vLLM's
  ``plot_pareto`` view), one point per load, joined in order of load.

Every point carries its run id in ``customdata[0]`` (as Explore's figures do).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from engine.jsonvalue import JSONMapping
from engine.report.figures import PALETTE, axis_label
from engine.report.loadcurve import LoadCurve, LoadPoint, slo_limits

NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT"}
X_AXES = {"offered": "offered load", "achieved": "achieved throughput (requests/s)"}


def _x(point: LoadPoint, against: str, top: float) -> float | None:
    if against == "achieved":
        return point.requests_per_s
    if point.offered == math.inf:  # "as fast as possible": drawn one step past the highest finite load
        return top * 1.5 if top > 0 else 1.0
    return point.offered


def _top(curve: LoadCurve) -> float:
    finite = [p.offered for p in curve.done() if p.offered is not None and math.isfinite(p.offered)]
    return max(finite, default=0.0)


def _error_bars(points: list[LoadPoint], key: str) -> dict[str, object]:
    plus, minus = [], []
    for p in points:
        value, ci = p.latency.get(key), p.intervals.get(key)
        ok = value is not None and isinstance(ci, (list, tuple)) and len(ci) == 2
        plus.append(max(0.0, ci[1] - value) if ok else 0.0)
        minus.append(max(0.0, value - ci[0]) if ok else 0.0)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1}


def _x_title(curve: LoadCurve, against: str) -> str:
    if against == "achieved":
        return X_AXES["achieved"]
    return f"offered load ({curve.unit})"


def latency_figure(
    curve: LoadCurve, group: str = "ttft_ms", against: str = "offered", answer: JSONMapping | None = None
) -> go.Figure:
    """``group``'s p50 and p99 against ``against`` ("offered" | "achieved"), with SLO, goodput, knee, answer."""
    fig = go.Figure()
    name = NAMES.get(group, group)
    fig.update_layout(
        title=f"{name} against {_x_title(curve, against)}",
        xaxis_title=_x_title(curve, against),
        yaxis_title=axis_label(f"{group}_p50").replace("p50", "p50 / p99"),
        yaxis2={
            "title": "goodput (share meeting the SLO)",
            "overlaying": "y",
            "side": "right",
            "range": [0, 1.05],
            "tickvals": [0, 0.25, 0.5, 0.75, 1],
            "tickformat": ".0%",
            "showgrid": False,
        },
        template="plotly_white",
        hovermode="closest",
        legend={"orientation": "h", "y": -0.2},
        margin={"l": 60, "r": 60, "t": 50, "b": 80},
    )
    points = [p for p in curve.done() if _x(p, against, 0) is not None]
    top = _top(curve)
    xs = [_x(p, against, top) for p in points]
    for i, pct in enumerate(("p50", "p99")):
        key = f"{group}_{pct}"
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[p.latency.get(key) for p in points],
                error_y=_error_bars(points, key),
                mode="lines+markers",
                name=f"{name} {pct}",
                customdata=[[p.run_id] for p in points],
                hovertemplate=f"run %{{customdata[0]}}<br>{name} {pct}: %{{y:.4g}} ms<br>x: %{{x:.4g}}<extra></extra>",
                line={"color": PALETTE[i], "dash": "solid" if pct == "p50" else "dot"},
            )
        )
    if any(p.goodput_fraction is not None for p in points):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[p.goodput_fraction for p in points],
                yaxis="y2",
                mode="lines+markers",
                name="goodput",
                customdata=[[p.run_id] for p in points],
                hovertemplate="run %{customdata[0]}<br>goodput %{y:.1%}<extra></extra>",
                line={"color": PALETTE[2], "dash": "dash", "width": 1},
                marker={"symbol": "square", "size": 6},
            )
        )
    _saturated_marks(fig, [(x, p) for x, p in zip(xs, points, strict=True) if p.saturated], group)
    _marks(fig, curve, group, against, answer, top)
    _stop_marks(fig, curve, against, top)
    return fig


def _saturated_marks(fig: go.Figure, saturated: list[tuple[float | None, LoadPoint]], group: str) -> None:
    """A red cross on the p99 of every run judged saturated (engine/measure/saturation.py)."""
    if not saturated:
        return
    fig.add_trace(
        go.Scatter(
            x=[x for x, _ in saturated],
            y=[p.latency.get(f"{group}_p99") for _, p in saturated],
            mode="markers",
            name="saturated",
            customdata=[[p.run_id] for _, p in saturated],
            hovertemplate="run %{customdata[0]}: saturated<extra></extra>",
            marker={"symbol": "x", "size": 11, "color": "#d62728"},
        )
    )


def _stop_marks(fig: go.Figure, curve: LoadCurve, against: str, top: float) -> None:
    """A red line where the sweep stopped at saturation, naming the points it did not run."""
    by_run = {p.run_id: p for p in curve.done()}
    for stop in curve.stops:
        point = by_run.get(stop.run_id)
        x = _x(point, against, top) if point is not None else None
        if x is None:
            continue
        fig.add_vline(
            x=x,
            line={"color": "#d62728", "dash": "dash"},
            annotation_text=f"stopped: saturated (not run: {stop.not_run_words})",
            annotation_position="top left",
        )


def _marks(fig: go.Figure, curve: LoadCurve, group: str, against: str, answer: JSONMapping | None, top: float) -> None:
    """The SLO line, the knee and the SLA answer's bracket."""
    limit = slo_limits(curve).get(group)
    if answer:
        limit = next((b["limit_ms"] for b in answer.get("slo", []) if b.get("metric") == group), limit)
    if limit is not None:
        fig.add_hline(y=limit, line={"color": "#d62728", "dash": "dash"}, annotation_text=f"SLO {limit:g} ms")
    knee = curve.knee
    if knee is not None:
        x = _x(knee, against, top)
        if x is not None:
            fig.add_vline(x=x, line={"color": "#7f7f7f", "dash": "dot"}, annotation_text="knee")
    if answer and against == "offered":
        low, high = answer.get("low"), answer.get("high")
        if low is not None:
            fig.add_vrect(
                x0=low,
                x1=high if high is not None else low,
                fillcolor="#2ca02c",
                opacity=0.15,
                line_width=0 if high is not None else 2,
                annotation_text=f"SLA: {answer.get('text', low)}",
                annotation_position="top left",
            )


def pareto_figure(curve: LoadCurve) -> go.Figure:
    """Tokens/s per user against output tokens/s per GPU (per device on a CPU), one point per load."""
    points = [p for p in curve.done() if p.tokens_per_s_per_user is not None]
    per_gpu = any(p.output_tokens_per_s_per_gpu is not None for p in points)
    xs = [p.output_tokens_per_s_per_gpu if per_gpu else p.output_tokens_per_s for p in points]
    x_title = "output tokens/s per GPU" if per_gpu else "output tokens/s (one device)"
    fig = go.Figure()
    fig.update_layout(
        title=f"tokens/s per user against {x_title}",
        xaxis_title=f"{x_title} (higher is better)",
        yaxis_title="tokens/s per user (higher is better)",
        template="plotly_white",
        hovermode="closest",
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    labels = ["max" if p.offered == math.inf else f"{p.offered:g}" for p in points]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[p.tokens_per_s_per_user for p in points],
            mode="lines+markers+text",
            text=labels,
            textposition="top center",
            name=curve.sweep,
            customdata=[[p.run_id] for p in points],
            hovertemplate=f"run %{{customdata[0]}}<br>load %{{text}} {curve.unit}<br>{x_title}: %{{x:.4g}}"
            "<br>per user: %{y:.4g} tok/s<extra></extra>",
            line={"color": PALETTE[0]},
        )
    )
    return fig
