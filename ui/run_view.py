"""Rendering of one run: headline cards, the metric table, config, provenance, error."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from engine.measure.registry import GROUP_LABELS as LABELS
from engine.measure.registry import LATENCY_GROUPS, failure_words, human_bytes
from engine.report.results import result_object
from ui.text import escape_markdown


def metric_table(obj: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for group in LATENCY_GROUPS:
        stats = obj.get(group) or {}
        rows.append(
            {"metric": f"{LABELS[group]} [ms]", **{k: stats.get(k) for k in ("mean", "p50", "p90", "p95", "p99")}}
        )
    return pd.DataFrame(rows)


def _headline(obj: dict[str, Any]) -> None:
    """The headline cards; the failure rate sits beside them, and a warning when a request failed."""
    ttft = (obj.get("ttft_ms") or {}).get("p50")
    tpot = (obj.get("tpot_ms") or {}).get("p50")
    rate = obj.get("error_rate")
    total = (obj.get("completed") or 0) + (obj.get("failed") or 0)
    speed = [
        ("TTFT p50", "-" if ttft is None else f"{ttft:,.1f} ms", None),
        ("TPOT p50", "-" if tpot is None else f"{tpot:,.1f} ms", "GenAI-Perf/AIPerf call this ITL"),
        ("Output tokens/s", f"{obj.get('output_tokens_per_s') or 0:,.1f}", None),
        ("Failed requests", "-" if rate is None else f"{rate:.0%}", f"{obj.get('failed')} of {total} measured"),
    ]
    resources = [
        ("Peak memory", human_bytes(obj.get("peak_memory_bytes")), obj.get("peak_memory_kind") or "peak memory"),
        ("Weights memory", human_bytes(obj.get("weights_memory_bytes")), "parameters and buffers as loaded"),
        ("Load time", f"{obj.get('load_s') or 0:,.1f} s", None),
    ]
    for row in (speed, resources):  # two rows of four, so no value is cut off on a laptop screen
        for col, (label, value, help_text) in zip(st.columns(4), row, strict=False):
            col.metric(label, value, help=help_text)
    failed = failure_words(obj)
    if failed:
        st.warning(
            f"{failed}: the latency and throughput figures cover the completed requests only"
            + (f" ({escape_markdown(obj['error'])})" if obj.get("error") else "."),
            icon=":material/warning:",
        )


def render_run(run: Any) -> None:
    """Show one stored run (a RunDetail from storage)."""
    obj = result_object(run)
    title = run.name or f"Run {run.id}"
    where = escape_markdown(run.device_name or run.device)
    st.subheader(f"{escape_markdown(title)}: {escape_markdown(run.model)} on {where}")
    st.caption(f"run {run.id} · {run.engine} · {run.created_at:%Y-%m-%d %H:%M UTC} · fingerprint {run.fingerprint}")
    if run.status != "done":
        st.error(f"This run {run.status}: {escape_markdown(run.error or 'no reason recorded')}")
    else:
        _headline(obj)
        st.dataframe(
            metric_table(obj),
            hide_index=True,
            width="stretch",
            column_config={
                k: st.column_config.NumberColumn(k, format="%.2f") for k in ("mean", "p50", "p90", "p95", "p99")
            },
        )
        st.caption(
            f"{obj.get('completed')} requests measured, {obj.get('failed')} failed, "
            f"{obj.get('warmup_excluded')} warm-up excluded; requests/s {obj.get('requests_per_s') or 0:.3f}; "
            f"tokens/s per user {obj.get('tokens_per_s_per_user') or 0:.2f}"
        )
    if run.status == "done":
        from ui.quality_view import render_quality

        render_quality(run)
    with st.expander("Config", expanded=False):
        st.code(json.dumps(run.spec, indent=2, sort_keys=True), language="json")
    with st.expander("Provenance", expanded=False):
        st.json(run.provenance)


# -- cached queries (keyed by a cheap "runs changed" token) and permalinks ---------------
def results_page(title: str) -> tuple[Any, tuple[int, int]] | None:
    """A results page's head: its title, then (database, runs-changed token); None when there is no database."""
    from ui.common import database

    st.title(title)
    db = database()
    return None if db is None else (db, runs_changed_token(db))


def runs_changed_token(db: Any) -> tuple[int, int]:
    """(number of runs, highest id): changes whenever a run is stored or deleted."""
    from storage.runs import runs_token

    return runs_token(db)


@st.cache_data(show_spinner=False, max_entries=8, ttl=3600)
def cached_runs_frame(_db: Any, db_url: str, token: tuple[int, int]) -> pd.DataFrame:
    """storage.frames.runs_frame, cached per database and runs-changed token."""
    from storage.frames import runs_frame

    return runs_frame(_db)


@st.cache_data(show_spinner=False, max_entries=64, ttl=3600)
def cached_run(_db: Any, db_url: str, run_id: int, token: tuple[int, int]) -> Any:
    """storage.runs.get_run, cached (None when there is no such run)."""
    from storage.runs import get_run

    return get_run(_db, run_id)


@st.cache_data(show_spinner=False, max_entries=64, ttl=3600)
def cached_requests(_db: Any, db_url: str, run_id: int, token: tuple[int, int]) -> list[Any]:
    """storage.runs.get_requests (raw stamps), cached."""
    from storage.runs import get_requests

    return get_requests(_db, run_id)


def current_params() -> dict[str, Any]:
    """The page's query parameters; repeated keys as lists."""
    out: dict[str, Any] = {}
    for key in st.query_params:
        values = st.query_params.get_all(key)
        out[key] = values if len(values) > 1 else (values[0] if values else "")
    return out


def share_link(url_path: str) -> str:
    """Show a "Copy link" box with the full URL of this view (public base URL + path + query)."""
    from engine.report.export import permalink
    from engine.settings import get_settings

    url = permalink(get_settings().public_base_url, url_path, current_params())
    with st.container():
        st.caption(":material/link: Copy link to this view (the copy icon copies it)")
        st.code(url, language=None, wrap_lines=True)
    return url
