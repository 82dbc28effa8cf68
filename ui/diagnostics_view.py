"""Diagnostics of a run on its page and in Compare: findings with evidence and a suggestion, energy
per output token (or why it is unavailable) and the telemetry charts with the requests in flight."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from engine.report.diagnostics import Finding, diagnose
from engine.report.diagnostics_figures import telemetry_figure
from engine.report.predicted import NOT_PREDICTED
from engine.report.results import energy_words
from engine.report.runlike import is_predicted
from ui.text import escape_markdown

ICONS = {"critical": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}


def run_series(db: Any, run_id: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(telemetry, server_metrics) side records of a run (None where absent)."""
    from storage.series import get_series

    return get_series(db, run_id, "telemetry"), get_series(db, run_id, "server_metrics")


def run_findings(db: Any, run: Any, requests: Sequence[Any] | None) -> tuple[list[Finding], dict[str, Any] | None]:
    """The run's findings and its telemetry series."""
    telemetry, server = run_series(db, run.id)
    return diagnose(run, requests, telemetry, server), telemetry


def _evidence(finding: Finding, key: str) -> None:
    ev = finding.evidence
    for line in ev.get("details") or []:
        st.markdown(f"- {escape_markdown(str(line))}")
    for name in ("requests", "samples", "processes"):
        rows = ev.get(name)
        if rows and isinstance(rows[0], dict):
            st.caption(name)
            st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"{key}_{name}")


def render_finding(finding: Finding, key: str) -> None:
    """One finding: its title by severity, the suggestion, and the evidence in an expander."""
    show = {"critical": st.error, "warning": st.warning}.get(finding.severity, st.info)
    show(f"**{escape_markdown(finding.title)}**  \n{escape_markdown(finding.suggestion)}", icon=ICONS[finding.severity])
    with st.expander(f"Evidence: {finding.kind.replace('_', ' ')}", expanded=False):
        _evidence(finding, key)


def render_diagnostics(db: Any, run: Any, requests: Sequence[Any] | None) -> None:
    """The Diagnostics section of a run's page."""
    if run.status != "done":
        return
    findings, telemetry = run_findings(db, run, requests)
    st.subheader("Diagnostics")
    st.markdown(f"**Energy per output token:** {escape_markdown(energy_words(run.metrics or {}))}")
    if not findings:
        st.success("No findings: no throttling, memory growth, P99 spikes or contention in the evidence.")
    for i, finding in enumerate(findings):
        render_finding(finding, f"finding_{i}")
    if telemetry is None:
        st.caption("No device telemetry for this run (stored before telemetry was recorded).")
        return
    st.plotly_chart(telemetry_figure(telemetry, requests, findings), key="telemetry")
    missing = telemetry.get("unavailable") or {}
    st.caption(
        f"Sampled every {telemetry.get('interval_ms')} ms ({telemetry.get('source')}); shaded: the findings' windows."
        + ("".join(f" {escape_markdown(k)}: {escape_markdown(v)}." for k, v in missing.items()) if missing else "")
    )


def render_compare_findings(db: Any, runs: Sequence[Any], requests: dict[int, Sequence[Any]]) -> None:
    """Compare: each run's findings side by side (titles by severity; evidence under each); a predicted run has
    none (not predicted)."""
    st.subheader("Diagnostics")
    for col, run in zip(st.columns(len(runs)), runs, strict=True):
        with col:
            st.markdown(f"**#{run.id}**" + (" (predicted)" if is_predicted(run) else ""))
            if is_predicted(run):
                st.caption(f"diagnostics and energy: {NOT_PREDICTED}")
                continue
            st.caption(f"energy/token: {escape_markdown(energy_words(run.metrics or {}))}")
            if run.status != "done":
                st.caption(f"run {run.status}")
                continue
            findings, _ = run_findings(db, run, requests.get(run.id))
            if not findings:
                st.caption("no findings")
            for i, finding in enumerate(findings):
                render_finding(finding, f"cmp_{run.id}_{i}")
