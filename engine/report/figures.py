"""Plotly figure builders for Explore (scatter with its Pareto front, sweep curves) and the HTML exports.

Pure functions of DataFrames and raw records; no Streamlit, so they are unit-tested
alone. Every run-bearing point carries its run id in ``customdata[0]`` so a click (or
an export) can find the run.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, TypedDict

import pandas as pd
import plotly.graph_objects as go

from engine.jsonvalue import JSONObject
from engine.measure import registry
from engine.measure.metric import format_with_ci
from engine.measure.registry import LATENCY_GROUPS, Kind
from engine.report.front_figures import draw_fronts, draw_predicted, error_bars, mark_trials
from engine.report.front_verdicts import interval_columns
from engine.report.fronts import Fronts, pareto_fronts, split_predicted
from engine.report.naming import frame_run_names
from engine.report.pareto import pareto_front

if TYPE_CHECKING:
    import numpy as np

PERCENTILE_KEYS: tuple[str, ...] = ("p50", "p90", "p99", "mean")
LATENCY_METRICS: tuple[str, ...] = tuple(f"{g}_{p}" for g in LATENCY_GROUPS for p in PERCENTILE_KEYS)
PERF_KINDS: tuple[Kind, ...] = ("latency", "throughput", "memory", "energy")
SYMBOLS: tuple[str, ...] = (
    "circle",
    "square",
    "diamond",
    "triangle-up",
    "cross",
    "x",
    "star",
    "triangle-down",
    "pentagon",
    "hexagon",
)
PALETTE: tuple[str, ...] = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
MAX_GROUPS = 12
WEBGL_ABOVE = 2000
# The legend under the plot, wrapping: long names never squeeze the plot's width (they did at ~80 px).
LEGEND_BELOW: JSONObject = {"orientation": "h", "yanchor": "top", "y": -0.14, "xanchor": "left", "x": 0}


def frame_hints(frame: pd.DataFrame) -> dict[str, str]:
    """``{"quality.task:NAME": kind}`` from a runs frame's ``quality.task:NAME:kind`` columns."""
    out: dict[str, str] = {}
    for column in frame.columns:
        if column.startswith("quality.task:") and column.endswith(":kind"):
            kinds = frame[column].dropna()
            if not kinds.empty:
                out[column.removesuffix(":kind")] = str(kinds.iloc[0])
    return out


def axis_options(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The frame's metric columns for axes: (latency/throughput/memory/energy, accuracy), registry order."""
    hints = frame_hints(frame)
    perf = registry.metric_keys(frame.columns, PERF_KINDS, hints)
    accuracy = registry.metric_keys(frame.columns, ("accuracy",), hints)
    return sorted(perf, key=registry.display_rank), sorted(accuracy, key=registry.display_rank)


def metric_name(column: str, hints: dict[str, str] | None = None) -> str:
    """A column's label: the registry's for metrics, the knob's name for recipe/workload columns."""
    if column.startswith(("recipe.", "workload.")):
        return column.split(".", 1)[1].replace("_", " ")
    return registry.label(column, (hints or {}).get(column))


def axis_label(column: str, hints: dict[str, str] | None = None) -> str:
    """Axis title for a frame column: the registry's header and which way is better."""
    metric = registry.lookup(column, (hints or {}).get(column))
    if not metric.is_metric:
        return metric_name(column, hints)
    return f"{metric.header} ({metric.better} is better)"


def _recipe_words_rows(frame: pd.DataFrame) -> list[str]:
    """Each row's hover text: the run's name (its recipe in words), model, device, engine, workload, failures."""
    n = len(frame)

    def col(name: str) -> pd.Series:
        return frame[name] if name in frame.columns else pd.Series([None] * n, index=frame.index, dtype=object)

    def words(series: pd.Series, prefix: str = "") -> pd.Series:
        return series.map(lambda v: "" if not _present(v) else f"{prefix}{v}")

    names = pd.Series([html.escape(n) for n in frame_run_names(frame)], index=frame.index, dtype=object)
    text = (
        "<b>"
        + names
        + "</b><br>"
        + col("model").map(lambda v: html.escape(str(v)))
        + " on "
        + col("device").astype(str)
    )
    text = text + "<br>" + col("engine").astype(str)
    if "workload.batch_size" in frame.columns:
        work = (
            "<br>batch "
            + col("workload.batch_size").map(_int)
            + " · "
            + col("workload.prompt_tokens").map(_int)
            + "→"
            + col("workload.output_tokens").map(_int)
            + " tokens"
        )
        text = text + work.where(col("workload.batch_size").map(_present), "")
    failed = [
        "" if not words else f"<br><b>{words}</b>"
        for words in map(_failure_words, col("error_rate"), col("completed"), col("failed"))
    ]
    return (text + pd.Series(failed, index=frame.index, dtype=object)).tolist()


def _failure_words(rate: object, completed: object, failed: object) -> str | None:
    counts = {"completed": completed, "failed": failed} if _present(completed) and _present(failed) else {}
    return registry.failure_words({**counts, "error_rate": rate if _present(rate) else None})


def _present(value: object) -> bool:
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _int(value: object) -> str:
    return str(int(value)) if _present(value) and isinstance(value, (int, float)) else "?"


def _ids(run_ids: pd.Series) -> np.ndarray:
    """customdata: one row per point holding its run id."""
    return run_ids.astype("int32").to_numpy().reshape(-1, 1)


def _direction(column: str, hints: dict[str, str], given: bool | None) -> bool | None:
    """Whether to minimise a column: the caller's choice, else the registry's (None: not a metric)."""
    if given is not None:
        return given
    metric = registry.lookup(column, hints.get(column))
    return metric.minimise if metric.is_metric else None


def front_run_ids(
    frame: pd.DataFrame, x: str, y: str, minimise_x: bool | None = None, minimise_y: bool | None = None
) -> list[int]:
    """Run ids on the Pareto front of ``x`` against ``y``; directions from the metric registry.

    Task columns take their direction from the frame's ``quality.task:NAME:kind`` column (an
    lm-eval ``word_perplexity`` is minimised, an accuracy maximised). No front when an axis is
    not a metric and no direction is given.
    """
    if frame.empty or x not in frame.columns or y not in frame.columns:
        return []
    hints = frame_hints(frame)
    mx, my = _direction(x, hints, minimise_x), _direction(y, hints, minimise_y)
    if mx is None or my is None:
        return []
    idx = pareto_front(frame[x].tolist(), frame[y].tolist(), mx, my)
    return [int(frame["run_id"].iloc[i]) for i in idx]


def _groups(frame: pd.DataFrame, column: str | None) -> tuple[list[str], pd.Series]:
    if not column or column not in frame.columns:
        return ["all runs"], pd.Series(["all runs"] * len(frame), index=frame.index)
    values = frame[column].map(lambda v: "(none)" if not _present(v) else str(v))
    names = sorted(values.unique().tolist(), key=lambda s: (len(s), s))
    if len(names) > MAX_GROUPS:
        keep = set(values.value_counts().index[: MAX_GROUPS - 1])
        values = values.map(lambda v: v if v in keep else "other")
        names = sorted(set(values), key=lambda s: (s == "other", len(s), s))
    return names, values


def figure_words(
    frame: pd.DataFrame, key: str, hints: dict[str, str] | None = None, labelled: bool = True
) -> list[str]:
    """Each row's figure in words with its 95 % CI, in the registry's one format: ``TPOT p50: 12.3 ms (95 % CI
    11.9–12.8)``, ``perplexity: 20.35 (95 % CI 16.5–24.2)`` (the CI from the ``KEY:lo``/``KEY:hi`` columns)."""
    metric = registry.lookup(key, (hints or {}).get(key))
    lo_col, hi_col = interval_columns(key)
    lows = frame[lo_col].tolist() if lo_col in frame.columns else [None] * len(frame)
    highs = frame[hi_col].tolist() if hi_col in frame.columns else [None] * len(frame)
    out = []
    for value, lo, hi in zip(pd.to_numeric(frame[key], errors="coerce").tolist(), lows, highs, strict=True):
        said = format_with_ci(metric, registry.finite(value), [lo, hi])
        out.append(f"{metric_name(key, hints)}: {said}" if labelled else said)
    return out


def _hover_texts(data: pd.DataFrame, x: str, y: str, hints: dict[str, str]) -> pd.Series:
    """Each point's hover: its run in words, then both figures with their intervals."""
    names = _recipe_words_rows(data)
    lines = zip(names, figure_words(data, x, hints), figure_words(data, y, hints), strict=True)
    return pd.Series([f"{n}<br>{html.escape(a)}<br>{html.escape(b)}" for n, a, b in lines], index=data.index)


class _Groups(TypedDict):
    """How :func:`_point_traces` splits and draws the points: hover texts, the colour and symbol columns, paired axes."""

    hover: pd.Series
    color: str | None
    symbol: str | None
    paired: tuple[str, ...]


def _point_traces(fig: go.Figure, data: pd.DataFrame, x: str, y: str, groups: _Groups) -> None:
    """One trace per (colour, symbol) group of ``data``."""
    hover, template = groups["hover"], "%{text}<extra></extra>"
    color_names, color_values = _groups(data, groups["color"])
    symbol_names, symbol_values = _groups(data, groups["symbol"])
    scatter = go.Scattergl if len(data) > WEBGL_ABOVE else go.Scatter
    for (ci, cname), (si, sname) in ((c, s) for c in enumerate(color_names) for s in enumerate(symbol_names)):
        part = data[(color_values == cname) & (symbol_values == sname)]
        if part.empty:
            continue
        name = " / ".join(n for n, col in ((cname, groups["color"]), (sname, groups["symbol"])) if col) or "runs"
        fig.add_trace(
            scatter(
                x=part[x].to_numpy(dtype=float),
                y=part[y].to_numpy(dtype=float),
                error_x=None if x in groups["paired"] else error_bars(part, x),
                error_y=None if y in groups["paired"] else error_bars(part, y),
                mode="markers",
                name=name,
                customdata=_ids(part["run_id"]),
                text=hover.loc[part.index].to_numpy(dtype=object),
                hovertemplate=template,
                marker={
                    "color": PALETTE[ci % len(PALETTE)],
                    "symbol": SYMBOLS[si % len(SYMBOLS)],
                    "size": 9,
                    "opacity": 0.85,
                },
            )
        )


def explore_scatter(
    frame: pd.DataFrame,
    x: str,
    y: str,
    color: str | None = None,
    symbol: str | None = None,
    minimise_x: bool | None = None,
    minimise_y: bool | None = None,
    title: str | None = None,
    fronts: Fronts | None = None,
) -> go.Figure:
    """Runs as points of ``x`` against ``y``; colour and symbol by any column; the Pareto fronts drawn.

    Rows missing either value are left out. Each point's ``customdata[0]`` is its run id; its
    hover names the recipe and, when some requests failed, the failure rate. Intervals in the
    frame (``KEY:lo``/``KEY:hi``, :func:`engine.report.fronts.with_intervals`) are error bars and are said
    on hover; an axis whose runs all pair (perplexity on one text: ``fronts.paired``) gets no bars, since
    each run's own band is not what the verdicts between them compare. The fronts (``fronts``, else :func:`engine.report.fronts.pareto_fronts` of the frame) follow
    the one verdict: one per model and workload, ties and runs not told apart ringed, Optimize trials
    (a ``trial`` column) crossed (:mod:`engine.report.front_figures`). Predicted rows (a true ``predicted``) are
    drawn apart, hollow and labelled predicted, and never enter a front. The legend sits under the plot.
    """
    hints = frame_hints(frame) if not frame.empty else {}
    fig = go.Figure()
    fig.update_layout(
        title=title or f"{metric_name(y, hints)} vs {metric_name(x, hints)}",
        xaxis_title=axis_label(x, hints),
        yaxis_title=axis_label(y, hints),
        legend_title_text=_legend_title(color, symbol),
        hovermode="closest",
        clickmode="event+select",
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        template="plotly_white",
        height=640,
        legend=LEGEND_BELOW,
    )
    if frame.empty or x not in frame.columns or y not in frame.columns:
        return fig
    data = frame[pd.to_numeric(frame[x], errors="coerce").notna() & pd.to_numeric(frame[y], errors="coerce").notna()]
    if data.empty:
        return fig
    hover = _hover_texts(data, x, y, hints)
    data, predicted = split_predicted(data)
    if fronts is None:
        fronts = pareto_fronts(data, x, y, hints, (minimise_x, minimise_y))
    _point_traces(fig, data, x, y, {"hover": hover, "color": color, "symbol": symbol, "paired": fronts.paired})
    draw_fronts(fig, data, x, y, fronts, hover)
    mark_trials(fig, data, x, y)
    draw_predicted(fig, predicted, x, y, hover)
    return fig


def _legend_title(color: str | None, symbol: str | None) -> str:
    names = [axis_label(c) if c.startswith(("recipe.", "workload.")) else c for c in (color, symbol) if c]
    return " / ".join(names)


def sweep_curves(frame: pd.DataFrame, x: str = "requests_per_s", y: str = "ttft_ms_p99") -> go.Figure:
    """Latency-throughput curves: one line per sweep, points sorted by ``x``."""
    fig = go.Figure()
    fig.update_layout(
        title=f"{metric_name(y)} vs {metric_name(x)} per sweep",
        xaxis_title=axis_label(x),
        yaxis_title=axis_label(y),
        template="plotly_white",
        hovermode="closest",
    )
    if frame.empty or "sweep" not in frame.columns or x not in frame.columns or y not in frame.columns:
        return fig
    data = frame[frame["sweep"].notna() & frame[x].notna() & frame[y].notna()]
    for i, (sweep, part) in enumerate(sorted(data.groupby("sweep"), key=lambda kv: str(kv[0]))):
        part = part.sort_values(x)
        fig.add_trace(
            go.Scatter(
                x=part[x].astype(float).tolist(),
                y=part[y].astype(float).tolist(),
                mode="lines+markers",
                name=str(sweep),
                customdata=[[int(r)] for r in part["run_id"]],
                hovertemplate=f"sweep {sweep}<br>run %{{customdata[0]}}<br>{metric_name(x)}: %{{x:.4g}}<br>"
                f"{metric_name(y)}: %{{y:.4g}}<extra></extra>",
                line={"color": PALETTE[i % len(PALETTE)]},
            )
        )
    return fig
