"""The client section of a run's page: how late the client itself was (send lag, event-loop lag, CPU).

A run measured by a client that set the pace carries the ``client_bound`` noise flag
(engine/run/noise.py); this section shows the figures behind it, and latency from the due time
beside latency from the send where requests had due times (coordinated omission).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.measure import registry

_LAGS = (
    ("send lag", "send_lag_ms"),
    ("event-loop lag", "loop_lag_ms"),
)


def client_lines(client: dict[str, Any]) -> list[str]:
    """The client group in words, one line per figure (pure: the page and its tests read it)."""
    lines = []
    for words, key in _LAGS:
        p50, p99, top = (client.get(f"{key}_{s}") for s in ("p50", "p99", "max"))
        if p50 is not None:
            lines.append(f"{words}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {top:.2f} ms")
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


def render(run: Any) -> None:
    """The section (nothing for runs stored before the client checked itself)."""
    metrics = run.metrics or {}
    client = metrics.get("client")
    if not isinstance(client, dict):
        return
    bound = any(f.get("flag") == "client_bound" for f in metrics.get("noise_flags") or [])
    with st.expander("Client" + (" (it set the pace: see the flag above)" if bound else ""), expanded=bound):
        st.markdown("\n".join(f"- {line}" for line in client_lines(client)))
        nodes = node_lines((run.provenance or {}).get("client_processes") or {})
        if nodes:
            st.markdown(f"Load sent from {len(nodes)} Ray nodes, one scheduler for all:")
            st.markdown("\n".join(f"- {line}" for line in nodes))
        due = metrics.get("ttft_from_due_ms")
        if isinstance(due, dict) and due.get("p50") is not None:
            ttft = registry.lookup("ttft_ms_p50").format((metrics.get("ttft_ms") or {}).get("p50"))
            st.markdown(
                f"- TTFT p50 from the due time: {registry.lookup('ttft_from_due_ms_p50').format(due['p50'])} "
                f"(from the send: {ttft}): the difference is how late requests went out"
            )
        st.caption(
            "Send lag: a request's send minus the moment it could go (its due time, or its concurrency slot). "
            "Event-loop lag: how late the client's loop woke when asked (stamps are taken that late)."
        )
