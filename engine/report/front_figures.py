"""Explore's scatter, its uncertainty drawn: error bars, each front with its band of ties, trials marked (pure).

Called by :func:`engine.report.figures.explore_scatter`. The front of each model and workload
(:func:`engine.report.fronts.pareto_fronts`) is a dashed line through its runs; the runs within
noise of it (tied) are ringed, and a light band joins the fronts' interval boxes, so a gap smaller
than the intervals reads as a tie, not a trade-off. Runs measured as an Optimize study's trial
(a ``trial`` column) get a cross over their point.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine.report.fronts import Fronts, interval_columns

FRONT_COLOURS = ("black", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b")
BAND = "rgba(120,120,120,0.15)"


def error_bars(part: pd.DataFrame, key: str) -> dict[str, Any] | None:
    """A plotly ``error_x``/``error_y`` of a figure's stored interval (None when no run of ``part`` has one)."""
    lo, hi = interval_columns(key)
    if lo not in part.columns or hi not in part.columns or part[lo].isna().all():
        return None
    value = part[key].to_numpy(dtype=float)
    below = np.nan_to_num(value - part[lo].to_numpy(dtype=float), nan=0.0).clip(min=0)
    above = np.nan_to_num(part[hi].to_numpy(dtype=float) - value, nan=0.0).clip(min=0)
    return {
        "type": "data",
        "symmetric": False,
        "array": above,
        "arrayminus": below,
        "thickness": 1,
        "width": 0,
        "color": "rgba(60,60,60,0.45)",
    }


def _box(row: pd.Series, key: str) -> tuple[float, float]:
    lo, hi = interval_columns(key)
    value = float(row[key])
    low = float(row[lo]) if lo in row and pd.notna(row[lo]) else value
    high = float(row[hi]) if hi in row and pd.notna(row[hi]) else value
    return min(low, value), max(high, value)


def _band(fig: go.Figure, rows: pd.DataFrame, x: str, y: str, name: str, show: bool) -> None:
    """A light band over the front's interval boxes (its runs and those tied with it)."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for _, row in rows.iterrows():
        (x0, x1), (y0, y1) = _box(row, x), _box(row, y)
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            fill="toself",
            fillcolor=BAND,
            line={"width": 0},
            hoverinfo="skip",
            name=name,
            legendgroup=name,
            showlegend=show,
        )
    )


def draw_fronts(fig: go.Figure, data: pd.DataFrame, x: str, y: str, fronts: Fronts, hover: pd.Series) -> None:
    """Each group's front: its interval band, the line through its runs, rings on the runs tied with it."""
    several = len(fronts.groups) > 1
    for i, (group, ids) in enumerate(fronts.groups.items()):
        if not ids:
            continue
        colour = FRONT_COLOURS[i % len(FRONT_COLOURS)]
        name = f"Pareto front: {group}" if several else "Pareto front"
        on = data[data["run_id"].isin(ids)]
        plain = on[~on["run_id"].isin(fronts.tied.get(group, []))].sort_values([x, y])
        _band(
            fig, on, x, y, "within noise of a front (95 % intervals)" if several else f"{name} (within noise)", i == 0
        )
        fig.add_trace(
            go.Scatter(
                x=plain[x].astype(float).tolist(),
                y=plain[y].astype(float).tolist(),
                mode="lines+markers",
                name=name,
                customdata=[[int(r)] for r in plain["run_id"]],
                text=hover.loc[plain.index].tolist(),
                hovertemplate="%{text}<br><i>on the Pareto front</i><extra></extra>",
                line={"color": colour, "dash": "dash", "width": 1.5},
                marker={"symbol": "circle-open", "size": 16, "color": colour, "line": {"width": 2}},
            )
        )
        tied = on[on["run_id"].isin(fronts.tied.get(group, []))]
        if not tied.empty:
            fig.add_trace(
                go.Scatter(
                    x=tied[x].astype(float).tolist(),
                    y=tied[y].astype(float).tolist(),
                    mode="markers",
                    name=f"{name}: tied within noise",
                    customdata=[[int(r)] for r in tied["run_id"]],
                    text=hover.loc[tied.index].tolist(),
                    hovertemplate="%{text}<br><i>within noise of the Pareto front</i><extra></extra>",
                    marker={"symbol": "circle-open-dot", "size": 16, "color": colour, "line": {"width": 1}},
                )
            )


def mark_trials(fig: go.Figure, data: pd.DataFrame, x: str, y: str) -> None:
    """A cross over every run that an Optimize study measured as a trial (the frame's ``trial`` column)."""
    if "trial" not in data.columns:
        return
    trials = data[data["trial"].notna()]
    if trials.empty:
        return
    fig.add_trace(
        go.Scatter(
            x=trials[x].astype(float).tolist(),
            y=trials[y].astype(float).tolist(),
            mode="markers",
            name="Optimize trial",
            customdata=[[int(r)] for r in trials["run_id"]],
            text=trials["trial"].astype(str).tolist(),
            hovertemplate="%{text}<extra>Optimize trial</extra>",
            marker={"symbol": "x-thin-open", "size": 13, "color": "#444", "line": {"width": 2}},
        )
    )
