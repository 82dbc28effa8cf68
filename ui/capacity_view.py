"""The capacity plan's answer on the What-if page: the sentence, the table, what it rests on, and two charts.

- **Replicas (or cost) against the SLO**: each configuration's replicas for the traffic's peak (or dollars per
  million output tokens) at the SLO's limits scaled (x: the first limit in ms, every limit scaled alike).
- **Cost against latency**: every configuration at every scaled SLO, placed at the latency it is predicted to
  give at the rate it sustains there, against what it costs; the points nobody beats on both joined (the front).

Every figure is predicted (the serving simulator under a calibration, or the uncalibrated roofline), never
measured, and every title, legend and table header says so.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.report.pareto import pareto_front
from engine.whatif.capacity.planner import CapacityPlan
from engine.whatif.capacity.sizing import Capacity, Sized
from engine.whatif.capacity.slo import NAMES
from engine.whatif.capacity.table import COLUMNS, notes, rows, traffic_words
from ui.text import escape_markdown

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d", "#bab0ac")


def _y(s: Sized, y: str) -> float | None:
    if y == "cost":
        return s.cost.usd_per_million_tokens
    return None if s.cost.replicas is None else float(s.cost.replicas)


def slo_chart(plan: CapacityPlan, y: str = "replicas") -> go.Figure:
    """Replicas (``y="replicas"``) or $ per 1M output tokens (``"cost"``) against the SLO, a line per configuration."""
    slo = plan.slo
    key = slo.primary
    fig = go.Figure()
    for i, c in enumerate(plan.capacities):
        ordered = sorted(c.sized, key=lambda s: s.scale)
        fig.add_trace(
            go.Scatter(
                x=[slo.limits()[key] * s.scale for s in ordered],
                y=[_y(s, y) for s in ordered],
                mode="lines+markers",
                name=f"{c.config.label} (predicted)",
                line={"color": PALETTE[i % len(PALETTE)], "shape": "hv" if y == "replicas" else "linear"},
                hovertext=[f"{s.slo.words()}: {_hover(s, plan)}" for s in ordered],
                hoverinfo="text+name",
            )
        )
    rule = f"goodput ≥ {slo.goodput:.0%}, " if slo.goodput is not None else f"{slo.pct_words()} "
    fig.add_vline(x=slo.limits()[key], line_dash="dot", line_color="#888", annotation_text="your SLO")
    fig.update_layout(
        title=f"{'Replicas for the peak' if y == 'replicas' else '$ per 1M output tokens'} against the SLO (predicted)",
        xaxis_title=f"{NAMES[key]} {rule}limit [ms] (every limit scaled alike)",
        yaxis_title="replicas" if y == "replicas" else "$ per 1M output tokens",
        yaxis={"rangemode": "tozero"},
        height=420,
        margin={"t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def _hover(s: Sized, plan: CapacityPlan) -> str:
    if s.sustained is None:
        return "not met at any rate"
    money = "" if s.cost.usd_per_million_tokens is None else f", ${s.cost.usd_per_million_tokens:,.3g}/1M"
    return f"{s.sustained:,.3g} {plan.traffic.unit} per replica, {s.cost.replicas} replicas{money}"


def _points(plan: CapacityPlan) -> list[tuple[Capacity, Sized, float, float]]:
    """(configuration, SLO, predicted latency at its sustained rate, cost) for every sized SLO with both."""
    key, priced = plan.slo.primary, all(c.config.price.per_device_hour is not None for c in plan.capacities)
    out = []
    for c in plan.capacities:
        for s in c.sized:
            if s.at_sustained is None:
                continue
            latency = s.at_sustained.figures.percentile(key, plan.slo.percentile)
            cost = s.cost.usd_per_million_tokens if priced else s.cost.gpu_hours_per_hour
            if latency is not None and cost is not None:
                out.append((c, s, latency, float(cost)))
    return out


def front_chart(plan: CapacityPlan) -> go.Figure:
    """Cost against predicted latency, every configuration at every scaled SLO; the front joined (module doc)."""
    points = _points(plan)
    priced = all(c.config.price.per_device_hour is not None for c in plan.capacities)
    fig = go.Figure()
    for i, c in enumerate(plan.capacities):
        mine = [p for p in points if p[0] is c]
        fig.add_trace(
            go.Scatter(
                x=[p[2] for p in mine],
                y=[p[3] for p in mine],
                mode="markers",
                name=f"{c.config.label} (predicted)",
                marker={"color": PALETTE[i % len(PALETTE)], "size": 10},
                hovertext=[p[1].slo.words() for p in mine],
            )
        )
    front = sorted(
        (points[i] for i in pareto_front([p[2] for p in points], [p[3] for p in points])), key=lambda p: p[2]
    )
    if front:
        fig.add_trace(
            go.Scatter(
                x=[p[2] for p in front],
                y=[p[3] for p in front],
                mode="lines",
                name="front: cheapest for its latency (predicted)",
                line={"color": "#333", "dash": "dash", "shape": "hv"},
            )
        )
    name = f"{NAMES[plan.slo.primary]} {plan.slo.pct_words()}"
    fig.update_layout(
        title="Cost against latency (predicted)",
        xaxis_title=f"{name} at the rate one replica sustains [ms]",
        yaxis_title="$ per 1M output tokens" if priced else "GPUs kept for the peak (not every price given)",
        yaxis={"rangemode": "tozero"},
        height=420,
        margin={"t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def answer(plan: CapacityPlan, source_words: str) -> None:
    """The plan on the page: the sentence, the table and what it rests on (module doc)."""
    (st.success if plan.met else st.warning)(escape_markdown(plan.sentence()), icon=":material/dns:")
    st.caption(escape_markdown(f"Traffic: {traffic_words(plan.traffic, source_words)}. SLO: {plan.slo.words()}."))
    st.dataframe(pd.DataFrame(rows(plan), columns=list(COLUMNS)), hide_index=True, width="stretch")
    st.caption(
        "Predicted by the serving simulator, never measured: each row's calibration says where its step costs "
        "come from and its leave-one-out error band (none claimed when uncalibrated). Prices are assumptions."
    )
    lines = notes(plan)
    uncalibrated = [n for n in lines if n.startswith("calibration: uncalibrated")]
    if uncalibrated:
        st.info(
            "Uncalibrated roofline: no measured run of this engine to calibrate from, so no error band is claimed.",
            icon=":material/info:",
        )
    with st.expander("What the table rests on (calibrations, prices, configurations left out)"):
        st.markdown("\n".join(f"- {escape_markdown(n)}" for n in lines))


def charts(plan: CapacityPlan, y: str) -> None:
    """Replicas (or cost) against the SLO, and cost against latency with its front (module doc)."""
    st.plotly_chart(slo_chart(plan, y), width="stretch")
    st.plotly_chart(front_chart(plan), width="stretch")
