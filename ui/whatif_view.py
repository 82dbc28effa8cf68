"""The What-if page's table and chart: estimates per hardware entry, in words where words are clearer.

An entry that does not fit shows why and what would fit instead of TTFT/TPOT numbers;
empty cells are blank (never "None"); each row says what bounds the estimate and how it
was calibrated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from ui.text import escape_markdown

Format = Callable[[Any], str]


def _num(fmt: str) -> Format:
    return lambda v: "" if v is None else fmt % v


def _pct(v: Any) -> str:
    return "" if v is None else f"±{v:.0f} %"


def _runs(v: Any) -> str:
    return ", ".join(f"#{i}" for i in v or [])


def _plain(v: Any) -> str:
    return "" if v is None else str(v)


# (row key, column header, cell format), in display order
COLUMNS: tuple[tuple[str, str, Format], ...] = (
    ("hardware", "hardware", _plain),
    ("fit", "fits?", _plain),
    ("ttft_ms", "TTFT [ms]", _num("%.1f")),
    ("tpot_ms", "TPOT [ms]", _num("%.2f")),
    ("output_tokens_per_s", "output tokens/s", _num("%.1f")),
    ("bound_words", "what bounds it", _plain),  # beside the figures: an overhead-bound row reads as a bug without it
    ("figures", "what its time is made of", _plain),
    ("band_ttft_pct", "TTFT error", _pct),
    ("band_tpot_pct", "TPOT error", _pct),
    ("measured_ttft_ms", "measured TTFT [ms]", _num("%.1f")),
    ("measured_tpot_ms", "measured TPOT [ms]", _num("%.2f")),
    ("measured_runs", "measured runs", _runs),
    ("calibration_status", "calibration", _plain),
    ("memory_gb", "memory [GB]", _num("%.2f")),
    ("usable_gb", "usable [GB]", _num("%.1f")),
    ("weights_gb", "weights [GB]", _num("%.2f")),
    ("kv_gb", "KV cache [GB]", _num("%.3f")),
    ("kv_per_token_kb", "KV per token [KiB]", _num("%.1f")),
    ("activations_gb", "activations [GB]", _num("%.3f")),
    ("max_batch", "largest batch", _plain),
    ("max_context", "largest context", _plain),
    ("precision", "precision", _plain),
    ("other_notes", "notes", _plain),
)


def display_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The table as text cells: blank where there is no value, the no-fit reason instead of timings."""
    out = []
    for row in rows:
        notes = [n for n in (row.get("notes") or "").split("; ") if n and n != row.get("fit")]
        full = dict(row, other_notes="; ".join(notes))
        out.append({header: fmt(full.get(key)) for key, header, fmt in COLUMNS})
    return pd.DataFrame(out, columns=[header for _k, header, _f in COLUMNS])


def table(rows: list[dict[str, Any]]) -> None:
    """One row per hardware entry: predictions, errors, measured overlay, bound, calibration, memory; then why, in
    words (each bound once), and where uncalibrated factors come from."""
    st.dataframe(display_frame(rows), hide_index=True, width="stretch")
    st.caption(
        "TTFT/TPOT error: the leave-one-out median error of the calibration (blank: not calibrated). "
        "calibration ±: the larger of the two. An entry that does not fit has no timings: the memory "
        "model says what would fit (tensor parallel, a smaller weight precision or a smaller batch)."
    )
    why_box(rows)


def why_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each bound's words once (the first token's, then the next tokens'), and the priors' source (pure)."""
    found = dict.fromkeys(lesson for r in rows if r.get("fits") for lesson in r.get("lessons") or [])
    lines = [lesson[0].upper() + lesson[1:] + "." for lesson in sorted(found, key=lambda w: w.startswith("next"))]
    priors = dict.fromkeys(r["priors"] for r in rows if r.get("priors") and r.get("band_ttft_pct") is None)
    return lines + [f"Priors (uncalibrated factors): {p}." for p in priors]


def why_box(rows: list[dict[str, Any]]) -> None:
    """Why the estimates are what they are, above the chart (an overhead-bound figure looks like a bug without it)."""
    lines = why_lines(rows)
    if lines:
        st.info(
            "**Why these figures**\n" + "\n".join(f"- {escape_markdown(line)}" for line in lines),
            icon=":material/lightbulb:",
        )


def comparison(compared: list[dict[str, Any]]) -> None:
    """The same question for a recipe that is not overhead-bound (a row per hardware entry), so the difference shows."""
    if not compared:
        return
    st.markdown(f"**For comparison: {escape_markdown(compared[0]['recipe'])}**")
    frame = pd.DataFrame(
        [
            {
                "hardware": r["hardware"],
                "TTFT [ms]": _num("%.1f")(r["ttft_ms"]),
                "TPOT [ms]": _num("%.2f")(r["tpot_ms"]),
                "output tokens/s": _num("%.1f")(r["output_tokens_per_s"]),
                "what bounds it": r["bound_words"],
                "what its time is made of": r["figures"],
            }
            for r in compared
        ]
    )
    st.dataframe(frame, hide_index=True, width="stretch")
    notes = dict.fromkeys(n for r in compared for n in [*why_lines([dict(r, priors=None)]), r["notes"]] if n)
    st.caption(escape_markdown(" ".join(n if n.endswith(".") else n + "." for n in notes)))


def _memory_traces(fig: go.Figure, x: list[str], rows: list[dict[str, Any]]) -> None:
    """Stacked memory parts per device and the usable capacity, in the third subplot."""
    for part, color in (
        ("weights_gb", "#72b7b2"),
        ("kv_gb", "#f58518"),
        ("activations_gb", "#b279a2"),
        ("overhead_gb", "#bab0ac"),
    ):
        fig.add_trace(
            go.Bar(x=x, y=[r[part] for r in rows], name=part.removesuffix("_gb"), marker_color=color), row=1, col=3
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[r["usable_gb"] for r in rows],
            mode="markers",
            name="usable capacity",
            marker={"symbol": "line-ew-open", "size": 30, "color": "black"},
        ),
        row=1,
        col=3,
    )


def _latency_traces(fig: go.Figure, col: int, key: str, band: str, rows: list[dict[str, Any]]) -> None:
    """Predicted bars (with their error band), measured markers, and "does not fit" where there is no bar."""
    x = [r["hardware"] for r in rows]
    err = [(r[band] or 0) / 100 * (r[key] or 0) for r in rows]
    fig.add_trace(
        go.Bar(
            x=x,
            y=[r[key] for r in rows],
            name="predicted" if col == 1 else None,
            showlegend=col == 1,
            marker_color="#4c78a8",
            legendgroup="pred",
            error_y={"type": "data", "array": err, "visible": any(err)},
        ),
        row=1,
        col=col,
    )
    measured = [r for r in rows if r[f"measured_{key}"] is not None]
    if measured:
        fig.add_trace(
            go.Scatter(
                x=[r["hardware"] for r in measured],
                y=[r[f"measured_{key}"] for r in measured],
                mode="markers",
                name="measured" if col == 1 else None,
                showlegend=col == 1,
                legendgroup="meas",
                marker={"symbol": "diamond", "size": 12, "color": "#e45756"},
            ),
            row=1,
            col=col,
        )
    misfits = [r["hardware"] for r in rows if not r["fits"]]
    if misfits:
        fig.add_trace(
            go.Scatter(
                x=misfits,
                y=[0] * len(misfits),
                mode="text",
                text=["does not fit"] * len(misfits),
                textposition="top center",
                showlegend=False,
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
    fig.update_yaxes(rangemode="tozero", row=1, col=col)  # bars from zero: a log axis made 51 vs 56 ms look 10x


def _compared_traces(fig: go.Figure, compared: list[dict[str, Any]]) -> None:
    """The comparison recipe's TTFT and TPOT as grey markers beside the bars."""
    for col, key in ((1, "ttft_ms"), (2, "tpot_ms")):
        fig.add_trace(
            go.Scatter(
                x=[r["hardware"] for r in compared],
                y=[r[key] for r in compared],
                mode="markers",
                name=f"{compared[0]['recipe'].split(' (')[0]} (for comparison)" if col == 1 else None,
                showlegend=col == 1,
                legendgroup="compared",
                marker={"symbol": "x", "size": 11, "color": "#54a24b"},
            ),
            row=1,
            col=col,
        )


def chart(rows: list[dict[str, Any]], compared: list[dict[str, Any]] | None = None) -> go.Figure:
    """TTFT, TPOT (with error bands and measured markers, and the comparison recipe's) and memory per device."""
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=("TTFT [ms]", "TPOT [ms] (GenAI-Perf: ITL)", "Memory per device [GB]")
    )
    for col, key, band in ((1, "ttft_ms", "band_ttft_pct"), (2, "tpot_ms", "band_tpot_pct")):
        _latency_traces(fig, col, key, band, rows)
    if compared:
        _compared_traces(fig, compared)
    _memory_traces(fig, [r["hardware"] for r in rows], rows)
    fig.update_layout(barmode="stack", height=430, margin={"t": 40, "b": 10}, legend={"orientation": "h", "y": -0.15})
    return fig
