"""The study's front as a plotly figure: feasible and infeasible trials, the Pareto front joined."""

from __future__ import annotations

import plotly.graph_objects as go

from engine.optimize.summary import FrontPoint, metric_label


def front_figure(points: list[FrontPoint]) -> go.Figure:
    """Measured trials (first objective against the accuracy axis): feasible as dots, infeasible as
    crosses, the feasible front as a line; hover names the trial, its recipe and what it broke."""
    fig = go.Figure()
    if not points:
        return fig
    x_key, y_key = points[0]["x_key"], points[0]["y_key"]
    groups = (
        ("feasible", [p for p in points if p["feasible"]], "circle", "#2a9d8f"),
        ("infeasible", [p for p in points if not p["feasible"]], "x", "#e76f51"),
    )
    for name, rows, symbol, color in groups:
        if not rows:
            continue
        fig.add_trace(
            go.Scatter(
                x=[p["x"] for p in rows],
                y=[p["y"] if y_key else 0.0 for p in rows],
                mode="markers",
                name=name,
                marker={"symbol": symbol, "size": 11, "color": color},
                text=[f"trial {p['trial']}: {p['recipe']}" + (f"<br>{p['why']}" if p["why"] else "") for p in rows],
                hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<extra></extra>",
            )
        )
    front = sorted((p for p in points if p["on_front"]), key=lambda p: p["x"])
    if len(front) > 1:
        fig.add_trace(
            go.Scatter(
                x=[p["x"] for p in front],
                y=[p["y"] for p in front],
                mode="lines",
                name="front (feasible)",
                line={"color": "#2a9d8f", "dash": "dot"},
                hoverinfo="skip",
            )
        )
    fig.update_layout(
        xaxis_title=metric_label(x_key),
        yaxis_title=metric_label(y_key) if y_key else "",
        height=420,
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        legend={"orientation": "h", "y": 1.08},
    )
    return fig
