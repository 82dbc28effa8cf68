"""The client section of a run's page: how late the client itself was (send lag, event-loop lag, CPU), why
(the cause its ``client_bound`` flag measured), and how late requests went out against their due times.

A run measured by a client that set the pace carries the ``client_bound`` noise flag
(engine/run/noise.py); this section shows the figures behind it and its cause with the advice that fits
(:func:`engine.measure.client_lag.client_cause`). The client's own send lag (send minus the moment a
request could go) and the schedule's send minus due are two figures, both from
:func:`engine.measure.schedule.lateness` and written in the same units: a client can be on time while its
requests wait for an engine that serves one at a time.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.measure.client_lag import client_cause
from engine.measure.schedule import duration_text, lateness_words
from engine.report.headline import run_schedule
from engine.spec import engines
from ui.text import escape_markdown

_LAGS = (
    ("the client's own send lag (send minus the moment it could go)", "send_lag_ms"),
    ("event-loop lag", "loop_lag_ms"),
)


def client_lines(client: dict[str, Any]) -> list[str]:
    """The client group in words, one line per figure (pure: the page and its tests read it)."""
    lines = []
    for words, key in _LAGS:
        stats = {s: client.get(f"{key}_{s}") for s in ("p50", "p99", "max")}
        if stats["p50"] is not None:
            lines.append(lateness_words(stats, words))
    share, busiest = client.get("cpu_share"), client.get("cpu_share_max")
    if share is not None:
        n = client.get("processes") or 1
        lines.append(
            f"CPU: {share:.0%} of the {client.get('cores') or 1} core(s) its {n} sending process(es) and driver could "
            f"use; the busiest process {busiest or 0:.0%} of its core"
        )
    return lines


def node_lines(sent: dict[str, Any]) -> list[str]:
    """Where the client processes ran when they ran on Ray nodes (``--load-nodes``), a line per node (pure)."""
    lines = []
    for node in sent.get("nodes") or []:
        offsets, rtts = node.get("clock_offsets_ns") or [], node.get("rtt_us") or []
        clock = ""
        if offsets:
            offset_ms = sorted(offsets)[len(offsets) // 2] / 1e6
            clock = f"; clock offset {offset_ms:+.3f} ms (± {min(rtts or [0]) / 2000:.3f} ms), used to align the time series"
        lines.append(
            f"node {node.get('node_ip') or '?'} ({str(node.get('node_id') or '?')[:12]}): "
            f"{node.get('processes', 0)} process(es), {node.get('requests', 0)} requests{clock}"
        )
    return lines


def cause_line(run: Any) -> str | None:
    """A client-bound run's cause and advice in words (stored with its flag; for runs flagged before causes were
    recorded, worked out now from the same stored figures)."""
    metrics = run.metrics or {}
    flag = next((f for f in metrics.get("noise_flags") or [] if f.get("flag") == "client_bound"), None)
    if flag is None:
        return None
    found = engines.find(run.engine)
    server_here = None if found is None else not found.capabilities.remote
    cause = client_cause(metrics.get("client") or {}, (run.provenance or {}).get("noise"), server_here)
    return f"Cause: {cause.words}. What to do: {cause.advice}."


def schedule_lines(run: Any, agg: Any | None) -> list[str]:
    """Send minus due beside the client's own lag, and latency from the due time (requests with due times)."""
    metrics = run.metrics or {}
    schedule = run_schedule(run, agg)
    lines = []
    if schedule:
        late = lateness_words(schedule.get("send_minus_due_ms") or {}, "send minus due (the schedule)")
        waited = "" if schedule.get("kept") else ": requests waited for the engine, not for the client"
        lines.append(late + waited)
    due = metrics.get("ttft_from_due_ms")
    if isinstance(due, dict) and due.get("p50") is not None:
        sent = (metrics.get("ttft_ms") or {}).get("p50")
        lines.append(
            f"TTFT p50 from the due time: {duration_text(due['p50'])} (from the send: {duration_text(sent)}): "
            "the difference is how late requests went out"
        )
    return lines


def render(run: Any, agg: Any | None = None) -> None:
    """The section (nothing for runs stored before the client checked itself)."""
    metrics = run.metrics or {}
    client = metrics.get("client")
    if not isinstance(client, dict):
        return
    cause = cause_line(run)
    with st.expander("Client" + (" (it set the pace: see the flag above)" if cause else ""), expanded=bool(cause)):
        if cause:
            st.markdown(escape_markdown(cause))
        st.markdown("\n".join(f"- {line}" for line in client_lines(client) + schedule_lines(run, agg)))
        nodes = node_lines((run.provenance or {}).get("client_processes") or {})
        if nodes:
            st.markdown(f"Load sent from {len(nodes)} Ray nodes, one scheduler for all:")
            st.markdown("\n".join(f"- {line}" for line in nodes))
        st.caption(
            "The client's own send lag: a request's send minus the moment it could go (its due time, or when a "
            "concurrency slot freed). Send minus due: the send minus the due time itself, which also counts the "
            "wait for a busy engine. Event-loop lag: how late the client's loop woke when asked (stamps are taken "
            "that late)."
        )
