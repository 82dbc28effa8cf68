"""Telemetry charts of one run: utilisation, temperature and clocks, power, memory, requests in flight.

One figure, one row per group of fields the series has, sharing the time axis (seconds from
the measured phase's start) with the run's requests in flight, and the findings' time
windows shaded, so a spike, a hot stretch and a memory climb line up by eye.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.jsonvalue import JSONMapping
from engine.report.diagnostics_base import NS, Finding, times, values

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord

ROWS: tuple[tuple[str, tuple[tuple[str, str, float], ...]], ...] = (
    (
        "utilisation [%]",
        (("cpu_util_mean_pct", "CPU mean", 1), ("cpu_util_max_pct", "CPU busiest core", 1), ("gpu_util_pct", "GPU", 1)),
    ),
    ("temperature [°C]", (("gpu_temp_c", "GPU", 1), ("cpu_temp_c", "CPU", 1))),
    ("clocks [MHz]", (("gpu_sm_clock_mhz", "SM", 1), ("gpu_mem_clock_mhz", "memory", 1), ("cpu_freq_mhz", "CPU", 1))),
    ("power [W]", (("gpu_power_w", "GPU", 1),)),
    ("memory [GB]", (("rss_bytes", "RSS (job tree)", 2**-30), ("gpu_mem_used_bytes", "GPU in use", 2**-30))),
    ("load", (("load_1m", "load 1 min", 1), ("steal_pct", "steal %", 1))),
)
FINDING_COLOURS = {
    "critical": "rgba(214,39,40,0.15)",
    "warning": "rgba(255,127,14,0.15)",
    "info": "rgba(31,119,180,0.1)",
}


def in_flight(requests: Sequence[RequestRecord], t0_ns: int) -> tuple[list[float], list[int]]:
    """A step curve of measured requests in flight (sent, last token not yet back) over time."""
    events: list[tuple[float, int]] = []
    for r in requests:
        if r.warmup or not r.chunk_ns:
            continue
        events += [((r.send_ns - t0_ns) / NS, 1), ((r.chunk_ns[-1] - t0_ns) / NS, -1)]
    xs, ys, level = [], [], 0
    for t, step in sorted(events):
        xs.append(round(t, 4))
        ys.append(level)
        level += step
        xs.append(round(t, 4))
        ys.append(level)
    return xs, ys


def telemetry_figure(
    series: JSONMapping, requests: Sequence[RequestRecord] | None = None, findings: Sequence[Finding] = ()
) -> go.Figure:
    """The run's telemetry over time (rows for the fields present), requests in flight, finding windows shaded."""
    t_s = times(series)
    rows = [
        (title, [(f, n, k) for f, n, k in lines if any(v is not None for v in values(series, f))])
        for title, lines in ROWS
    ]
    rows = [(title, lines) for title, lines in rows if lines]
    with_requests = bool(requests)
    titles = [t for t, _ in rows] + (["requests in flight"] if with_requests else [])
    fig = make_subplots(
        rows=max(len(titles), 1), cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.05
    )
    for row, (_title, lines) in enumerate(rows, start=1):
        for name, label, scale in lines:
            ys = [None if v is None else v * scale for v in values(series, name)]
            fig.add_trace(go.Scatter(x=t_s, y=ys, name=label, mode="lines", legendgroup=str(row)), row=row, col=1)
    if with_requests:
        xs, ys = in_flight(requests or [], int(series.get("t0_ns") or 0))
        fig.add_trace(
            go.Scatter(x=xs, y=ys, name="in flight", mode="lines", line={"shape": "hv"}), row=len(titles), col=1
        )
    for finding in findings:
        for a, b in (finding.evidence.get("windows") or [])[:20]:
            fig.add_vrect(x0=a, x1=max(b, a + 0.05), fillcolor=FINDING_COLOURS.get(finding.severity), line_width=0)
    fig.update_layout(
        title={"text": "Device telemetry during the measured phase"},
        height=170 * max(len(titles), 1) + 80,
        margin={"t": 60, "b": 40, "l": 60, "r": 20},
        legend={"orientation": "h", "y": -0.05},
    )
    fig.update_xaxes(title_text="seconds from the start of the measured phase", row=max(len(titles), 1), col=1)
    return fig
