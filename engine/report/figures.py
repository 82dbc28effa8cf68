"""Plotly figure builders for the Explore, Run and Compare pages and the HTML exports.

Pure functions of DataFrames and raw records; no Streamlit, so they are unit-tested
alone. Every run-bearing point carries its run id in ``customdata[0]`` so a click (or
an export) can find the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from engine.measure.metrics import NS_PER_MS, itl_gaps_ns, tpot_ns, ttft_ns
from engine.measure.records import RequestRecord
from engine.report.compare import changed_knobs, metric_label
from engine.report.pareto import minimise_by_default, pareto_front

PERCENTILE_KEYS: tuple[str, ...] = ("p50", "p90", "p99", "mean")
LATENCY_METRICS: tuple[str, ...] = tuple(
    f"{g}_{p}" for g in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms") for p in PERCENTILE_KEYS
)
THROUGHPUT_METRICS: tuple[str, ...] = (
    "output_tokens_per_s",
    "tokens_per_s_per_user",
    "requests_per_s",
    "goodput_requests_per_s",
)
OTHER_METRICS: tuple[str, ...] = ("peak_memory_bytes", "load_s")
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


def axis_label(column: str) -> str:
    """Axis title for a frame column, with the better direction."""
    if column.startswith("recipe.") or column.startswith("workload."):
        return column.split(".", 1)[1].replace("_", " ")
    arrow = "lower is better" if minimise_by_default(column) else "higher is better"
    return f"{metric_label(column)} ({arrow})"


def _recipe_words_rows(frame: pd.DataFrame) -> list[str]:
    """The recipe in words for each row of a runs frame (hover text), built column-wise."""
    n = len(frame)

    def col(name: str) -> pd.Series:
        return frame[name] if name in frame.columns else pd.Series([None] * n, index=frame.index, dtype=object)

    def words(series: pd.Series, prefix: str = "") -> pd.Series:
        return series.map(lambda v: "" if not _present(v) else f"{prefix}{v}")

    text = "<b>run " + col("run_id").astype(str) + words(col("name"), " · ") + "</b><br>"
    text = text + col("model").astype(str) + " on " + col("device").astype(str) + "<br>" + col("engine").astype(str)
    knob_cols = sorted(c for c in frame.columns if c.startswith("recipe."))
    memo: dict[tuple[Any, ...], str] = {}
    knob_text = []
    for key in zip(col("engine"), *(frame[c] for c in knob_cols), strict=True):
        words_for = memo.get(key)
        if words_for is None:
            recipe = {c.removeprefix("recipe."): v for c, v in zip(knob_cols, key[1:], strict=True) if _present(v)}
            changed = changed_knobs({"engine": key[0], **recipe})
            words_for = memo[key] = "".join(
                f" · {k.replace('_implementation', '').replace('_', ' ')}" + ("" if v is True else f" {v}")
                for k, v in sorted(changed.items())
            )
        knob_text.append(words_for)
    text = text + pd.Series(knob_text, index=frame.index, dtype=object)
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
    return text.tolist()


def _present(value: Any) -> bool:
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _int(value: Any) -> str:
    return str(int(value)) if _present(value) and isinstance(value, (int, float)) else "?"


def _ids(run_ids: pd.Series) -> Any:
    """customdata: one row per point holding its run id."""
    return run_ids.astype("int32").to_numpy().reshape(-1, 1)


def front_run_ids(
    frame: pd.DataFrame, x: str, y: str, minimise_x: bool | None = None, minimise_y: bool | None = None
) -> list[int]:
    """Run ids on the Pareto front of ``x`` against ``y`` (directions default per metric)."""
    if frame.empty or x not in frame.columns or y not in frame.columns:
        return []
    mx = minimise_by_default(x) if minimise_x is None else minimise_x
    my = minimise_by_default(y) if minimise_y is None else minimise_y
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


def explore_scatter(
    frame: pd.DataFrame,
    x: str,
    y: str,
    color: str | None = None,
    symbol: str | None = None,
    minimise_x: bool | None = None,
    minimise_y: bool | None = None,
    title: str | None = None,
) -> go.Figure:
    """Runs as points of ``x`` against ``y``; colour and symbol by any column; Pareto front drawn.

    Rows missing either value are left out. Each point's ``customdata[0]`` is its run id.
    """
    fig = go.Figure()
    fig.update_layout(
        title=title or f"{metric_label(y)} vs {metric_label(x)}",
        xaxis_title=axis_label(x),
        yaxis_title=axis_label(y),
        legend_title_text=_legend_title(color, symbol),
        hovermode="closest",
        clickmode="event+select",
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        template="plotly_white",
    )
    if frame.empty or x not in frame.columns or y not in frame.columns:
        return fig
    data = frame[pd.to_numeric(frame[x], errors="coerce").notna() & pd.to_numeric(frame[y], errors="coerce").notna()]
    if data.empty:
        return fig
    hover = pd.Series(_recipe_words_rows(data), index=data.index)
    color_names, color_values = _groups(data, color)
    symbol_names, symbol_values = _groups(data, symbol)
    scatter = go.Scattergl if len(data) > WEBGL_ABOVE else go.Scatter
    for ci, cname in enumerate(color_names):
        for si, sname in enumerate(symbol_names):
            part = data[(color_values == cname) & (symbol_values == sname)]
            if part.empty:
                continue
            name = " / ".join(n for n, col in ((cname, color), (sname, symbol)) if col) or "runs"
            fig.add_trace(
                scatter(
                    x=part[x].to_numpy(dtype=float),
                    y=part[y].to_numpy(dtype=float),
                    mode="markers",
                    name=name,
                    customdata=_ids(part["run_id"]),
                    text=hover.loc[part.index].to_numpy(dtype=object),
                    hovertemplate="%{text}<br>" + f"{metric_label(x)}: %{{x:.4g}}<br>{metric_label(y)}: %{{y:.4g}}"
                    "<extra></extra>",
                    marker={
                        "color": PALETTE[ci % len(PALETTE)],
                        "symbol": SYMBOLS[si % len(SYMBOLS)],
                        "size": 9,
                        "opacity": 0.85,
                    },
                )
            )
    front = set(front_run_ids(data, x, y, minimise_x, minimise_y))
    if front:
        fr = data[data["run_id"].isin(front)].sort_values([x, y])
        fig.add_trace(
            go.Scatter(
                x=fr[x].astype(float).tolist(),
                y=fr[y].astype(float).tolist(),
                mode="lines+markers",
                name="Pareto front",
                customdata=[[int(r)] for r in fr["run_id"]],
                text=hover.loc[fr.index].tolist(),
                hovertemplate="%{text}<br><i>on the Pareto front</i><extra></extra>",
                line={"color": "black", "dash": "dash", "width": 1.5, "shape": "linear"},
                marker={"symbol": "circle-open", "size": 16, "color": "black", "line": {"width": 2}},
            )
        )
    return fig


def _legend_title(color: str | None, symbol: str | None) -> str:
    names = [axis_label(c) if c.startswith(("recipe.", "workload.")) else c for c in (color, symbol) if c]
    return " / ".join(names)


def sweep_curves(frame: pd.DataFrame, x: str = "requests_per_s", y: str = "ttft_ms_p99") -> go.Figure:
    """Latency-throughput curves: one line per sweep, points sorted by ``x``."""
    fig = go.Figure()
    fig.update_layout(
        title=f"{metric_label(y)} vs {metric_label(x)} per sweep",
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
                hovertemplate=f"sweep {sweep}<br>run %{{customdata[0]}}<br>{metric_label(x)}: %{{x:.4g}}<br>"
                f"{metric_label(y)}: %{{y:.4g}}<extra></extra>",
                line={"color": PALETTE[i % len(PALETTE)]},
            )
        )
    return fig


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
        title=f"{metric_label(metric + '_p50').replace(' p50', '').replace(' [ms]', '')} CDF",
        xaxis_title=f"{metric_label(metric + '_p50').split(' p50')[0].split(' [')[0]} [ms]",
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
    name = metric_label(metric + "_p50").split(" p50")[0].split(" [")[0]
    fig = go.Figure(go.Histogram(x=[float(v) for v in values], nbinsx=bins, name=name, marker={"color": PALETTE[0]}))
    fig.update_layout(
        title=f"{name} histogram (n={len(values)})",
        xaxis_title=f"{name} [ms]",
        yaxis_title="count",
        template="plotly_white",
        bargap=0.05,
    )
    return fig


def timeline_figure(requests: Sequence[RequestRecord]) -> go.Figure:
    """Per-request timeline: queued (due → sent), to first token, decoding (first → last token).

    Times are ms since the earliest stamp of the run; warm-up requests are drawn faded.
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
    t0 = min(min(r.arrival_ns, r.send_ns) for r in requests)

    def ms(t: int) -> float:
        return (t - t0) / NS_PER_MS

    phases: dict[str, tuple[list[float], list[float], list[str], list[str]]] = {
        k: ([], [], [], []) for k in ("queued", "to first token", "decoding", "failed")
    }
    for r in requests:
        label = f"#{r.index}" + (" (warm-up)" if r.warmup else "")
        tokens = [t for t, n in zip(r.chunk_ns, r.chunk_tokens, strict=True) if n > 0]
        spans = [("queued", r.arrival_ns, r.send_ns)]
        if tokens:
            spans += [("to first token", r.send_ns, tokens[0]), ("decoding", tokens[0], tokens[-1])]
        if not r.ok:
            spans.append(("failed", tokens[-1] if tokens else r.send_ns, (tokens[-1] if tokens else r.send_ns) + 1))
        for phase, a, b in spans:
            if b < a:
                continue
            base, length, ys, hover = phases[phase]
            base.append(ms(a))
            length.append(max(ms(b) - ms(a), 0.0))
            ys.append(label)
            hover.append(
                f"{label} {phase}: {ms(a):.1f} → {ms(b):.1f} ms" + (f" ({r.error})" if phase == "failed" else "")
            )
    colours = {"queued": "#bbbbbb", "to first token": "#ff7f0e", "decoding": "#1f77b4", "failed": "#d62728"}
    for phase, (base, length, ys, hover) in phases.items():
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
