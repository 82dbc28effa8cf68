"""The server-metrics section of a run's page: what a serving engine said about itself during the
measured phase (requests running and waiting, KV-cache usage, preemptions, prefix-cache hits),
beside the client's own view of the same seconds (its requests in flight, their latencies).

Both share one clock: the scraper's ``t0_ns`` and the requests' stamps are ``perf_counter_ns``
of the job's process (:mod:`engine.measure.server_metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from engine.measure.server_metrics import summarize
from storage.series import get_series
from ui.text import escape_markdown

NS = 1e9
_LABELS = {
    "num_requests_running": "server: running",
    "num_requests_waiting": "server: waiting",
    "kv_cache_usage_perc": "KV cache used [%]",
    "prefix_cache_hit_rate": "prefix-cache hit rate [%]",
    "num_preemptions_total": "preemptions (since start)",
}


def client_in_flight(requests: Sequence[Any], t0_ns: int) -> tuple[list[float], list[int]]:
    """A step line of the measured requests the client had in flight: (seconds since ``t0_ns``, count)."""
    events: list[tuple[int, int]] = []
    for r in requests:
        if r.warmup:
            continue
        end = r.chunk_ns[-1] if r.chunk_ns else r.send_ns
        events += [(r.send_ns, 1), (max(end, r.send_ns), -1)]
    xs, ys, level = [], [], 0
    for t, step in sorted(events):
        xs.append((t - t0_ns) / NS)
        ys.append(level)
        level += step
        xs.append((t - t0_ns) / NS)
        ys.append(level)
    return xs, ys


def _latencies(requests: Sequence[Any], t0_ns: int) -> tuple[list[float], list[float], list[float]]:
    """(send time in s since ``t0_ns``, TTFT ms, E2EL ms) of each measured request that produced a token."""
    xs, ttft, e2el = [], [], []
    for r in requests:
        if r.warmup or not r.chunk_ns:
            continue
        xs.append((r.send_ns - t0_ns) / NS)
        ttft.append((r.chunk_ns[0] - r.send_ns) / 1e6)
        e2el.append((r.chunk_ns[-1] - r.send_ns) / 1e6)
    return xs, ttft, e2el


def server_figure(series: dict[str, Any], requests: Sequence[Any]) -> go.Figure:
    """Three panels on one time axis: requests (server and client), cache figures, request latencies."""
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=("Requests", "Caches", "Latency")
    )
    t_s = series.get("t_s") or []
    fields = series.get("fields") or {}
    for name in ("num_requests_running", "num_requests_waiting"):
        if name in fields:
            fig.add_trace(go.Scatter(x=t_s, y=fields[name], name=_LABELS[name], mode="lines+markers"), row=1, col=1)
    t0 = int(series.get("t0_ns") or 0)
    xs, ys = client_in_flight(requests, t0)
    fig.add_trace(go.Scatter(x=xs, y=ys, name="client: in flight", mode="lines", line_dash="dot"), row=1, col=1)
    for name in ("kv_cache_usage_perc", "prefix_cache_hit_rate"):
        if name in fields:
            pct = [None if v is None else 100.0 * v for v in fields[name]]
            fig.add_trace(go.Scatter(x=t_s, y=pct, name=_LABELS[name], mode="lines+markers"), row=2, col=1)
    sent, ttft, e2el = _latencies(requests, t0)
    fig.add_trace(go.Scatter(x=sent, y=ttft, name="TTFT [ms]", mode="markers"), row=3, col=1)
    fig.add_trace(go.Scatter(x=sent, y=e2el, name="E2EL [ms]", mode="markers"), row=3, col=1)
    fig.update_layout(template="plotly_white", height=640, legend_orientation="h", margin_t=40)
    fig.update_xaxes(title_text="seconds since the measured phase started", row=3, col=1)
    fig.update_yaxes(title_text="requests", row=1, col=1)
    fig.update_yaxes(title_text="%", row=2, col=1)
    fig.update_yaxes(title_text="ms (at send time)", row=3, col=1)
    return fig


def summary_line(series: dict[str, Any]) -> str:
    """``vllm: peak 8 running, 3 waiting · KV cache up to 12 % · 0 preemptions · prefix-cache hits 40 %``."""
    s = summarize(series)
    parts = []
    if s["peak_running"] is not None or s["peak_waiting"] is not None:
        run, wait = s["peak_running"], s["peak_waiting"]
        parts.append(f"peak {_n(run)} running, {_n(wait)} waiting")
    if s["peak_kv_cache_usage_perc"] is not None:
        parts.append(f"KV cache up to {100 * s['peak_kv_cache_usage_perc']:.1f} %")
    if s["preemptions"] is not None:
        parts.append(f"{_n(s['preemptions'])} preemptions")
    if s["prefix_cache_hit_rate"] is not None:
        parts.append(f"prefix-cache hits {100 * s['prefix_cache_hit_rate']:.0f} %")
    scrapes = len(series.get("t_s") or [])
    head = f"{series.get('source', 'unknown')}, {scrapes} scrapes every {series.get('interval_ms', 0):.0f} ms"
    return head + (": " + " · ".join(parts) if parts else ": no known metric names")


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def render(db: Any, run: Any, requests: Sequence[Any]) -> None:
    """The section, for runs of a serving engine (nothing for the others)."""
    series = get_series(db, run.id, "server_metrics")
    note = (getattr(run, "provenance", None) or {}).get("server_metrics")
    if series is None and not note:
        return
    st.subheader("Server metrics")
    if series is None:
        st.caption(f"No server metrics: {escape_markdown(note)}.")
        return
    st.caption(summary_line(series))
    st.plotly_chart(server_figure(series, requests), key="server_metrics")
    names = series.get("raw_names") or {}
    if names:
        st.caption("From " + ", ".join(f"`{m}`" for m in sorted(set(names.values()))) + ".")
