"""Explore's scatter, its uncertainty drawn: error bars, each front's line and rings, trials marked (pure).

Called by :func:`engine.report.figures.explore_scatter`. The front of each model and workload
(:func:`engine.report.fronts.pareto_fronts`) is a dashed line through the runs that are a clear trade-off
(each significantly better on one axis); runs tied with another front run (no significant difference on
either axis, within ± 5 %) get a dotted ring, runs the data cannot tell apart from one get a dashed ring,
in the words of :mod:`engine.report.verdict_words`; neither is joined by the line. Runs measured as an
Optimize study's trial (a ``trial`` column) get a cross over their point. Predicted runs (the serving simulator's),
when drawn at all, are hollow diamonds of their own, labelled predicted, without error bars, never on a front.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine.report.front_verdicts import interval_columns
from engine.report.fronts import Fronts
from engine.report.verdict_words import NOT_SEPARATED, TIED

FRONT_COLOURS = ("black", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b")
PREDICTED_NAME = "predicted (not measured, never on a front)"
PREDICTED_COLOUR = "#7b3294"


def error_bars(part: pd.DataFrame, key: str) -> dict[str, object] | None:
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


def _rings(fig: go.Figure, rows: pd.DataFrame, x: str, y: str, hover: pd.Series, style: dict[str, str | bool]) -> None:
    if rows.empty:
        return
    fig.add_trace(
        go.Scatter(
            x=rows[x].astype(float).tolist(),
            y=rows[y].astype(float).tolist(),
            mode="markers",
            name=style["name"],
            legendgroup=style["name"],
            showlegend=style["legend"],
            customdata=[[int(r)] for r in rows["run_id"]],
            text=hover.loc[rows.index].tolist(),
            hovertemplate=f"%{{text}}<br><i>{style['words']}</i><extra></extra>",
            marker={"symbol": style["symbol"], "size": 18, "color": style["colour"], "line": {"width": 1.5}},
        )
    )


def draw_fronts(fig: go.Figure, data: pd.DataFrame, x: str, y: str, fronts: Fronts, hover: pd.Series) -> None:
    """Each group's front: the line through its clear trade-offs, rings on the runs tied or not told apart."""
    several = len(fronts.groups) > 1
    shown = {"tied": False, "unclear": False}
    for i, (group, ids) in enumerate(fronts.groups.items()):
        if not ids:
            continue
        colour = FRONT_COLOURS[i % len(FRONT_COLOURS)]
        label = fronts.labels.get(group, group)
        name = f"Pareto front: {label}" if several else "Pareto front"
        on = data[data["run_id"].isin(ids)]
        plain = on[~on["run_id"].isin(fronts.ringed(group))].sort_values([x, y])
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
        for kind, symbol, words in (("tied", "circle-open-dot", TIED), ("unclear", "hexagon-open", NOT_SEPARATED)):
            rows = on[on["run_id"].isin(getattr(fronts, kind).get(group, []))]
            style = {"name": f"front: {words}", "words": words, "symbol": symbol, "colour": colour}
            _rings(fig, rows, x, y, hover, {**style, "legend": not shown[kind] and not rows.empty})
            shown[kind] = shown[kind] or not rows.empty


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


def draw_predicted(fig: go.Figure, rows: pd.DataFrame, x: str, y: str, hover: pd.Series) -> None:
    """Predicted runs over the measured ones: hollow diamonds labelled predicted (their hover too), no error bars."""
    if rows.empty:
        return
    fig.add_trace(
        go.Scatter(
            x=rows[x].astype(float).tolist(),
            y=rows[y].astype(float).tolist(),
            mode="markers",
            name=PREDICTED_NAME,
            customdata=[[int(r)] for r in rows["run_id"]],
            text=hover.loc[rows.index].tolist(),
            hovertemplate="%{text}<br><i>predicted, not measured: never on a front</i><extra></extra>",
            marker={"symbol": "diamond-open", "size": 13, "color": PREDICTED_COLOUR, "line": {"width": 2}},
        )
    )
