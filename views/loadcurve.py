"""Load curves: one rate or concurrency sweep (``?sweep=NAME``): latency against offered load and
achieved throughput, the SLO and goodput, the knee, an SLA answer; tokens/s per user against per GPU;
which runs were saturated, and where a sweep that stops at saturation stopped, why, and the points
it did not run.

Without ``?sweep`` the page lists the sweeps. A sweep named ``sla:<search>`` holds an SLA
search's probes: its answer is shown and marked on the curves.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

import pandas as pd
import streamlit as st

from engine.measure.saturation import RECORD, STOP_RECORD
from engine.report.loadcurve import build_curve, not_run_rows, table
from engine.report.loadfigures import latency_figure, pareto_figure
from storage import StorageError
from ui.run_view import results_page, share_link
from ui.text import escape_markdown

SLA_PREFIX = "sla:"


@st.cache_data(show_spinner=False, max_entries=32, ttl=600)
def _curve(_db: Any, db_url: str, sweep: str, token: tuple[int, int]) -> Any:
    from storage.series import series_by_run
    from storage.sweeps import sweep_runs

    runs = sweep_runs(_db, sweep)
    ids = [int(r.id) for r in runs]
    return build_curve(sweep, runs, series_by_run(_db, ids, RECORD), series_by_run(_db, ids, STOP_RECORD))


def _link(sweep: str) -> str:
    return f"loadcurve?sweep={quote(sweep, safe='')}"


def sweep_list(db: Any) -> None:
    """Every sweep, newest first, each a link to its load curve."""
    from storage.sweeps import list_sweeps

    sweeps = list_sweeps(db)
    if not sweeps:
        st.info(
            "No sweeps yet. A sweep is a set of runs stored under one name, one per request rate or "
            "concurrency: `python -m engine sweep --model demo --engine vllm-server --rates 1,2,4`, a load "
            "sweep from the Launch page, or the probes of an SLA search (`python -m engine sla ...`)."
        )
        return
    st.caption("Pick a sweep to see its load curve.")
    for info in sweeps:
        runs = "1 run" if info.runs == 1 else f"{info.runs} runs"
        st.markdown(
            f"- [{escape_markdown(info.name)}]({_link(info.name)}) · {runs} ({info.done} done) · "
            f"newest {info.newest:%Y-%m-%d %H:%M}"
        )


def _search_answer(db: Any, sweep: str) -> dict[str, Any] | None:
    """The SLA search behind an ``sla:`` sweep: shown, and its answer returned for the figures."""
    if not sweep.startswith(SLA_PREFIX):
        return None
    from storage import sla as store
    from ui.sla_view import render_answer

    search = store.find(db, sweep.removeprefix(SLA_PREFIX))
    if search is None:
        return None
    with st.container(border=True):
        st.markdown(f"**SLA search {escape_markdown(search.name)}**")
        render_answer(search)
    return search.answer


def _points_table(curve: Any) -> None:
    frame = pd.DataFrame(table(curve))
    if frame.empty:
        return
    frame.insert(1, "open", [f"run?run={r}" for r in frame["run"]])
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="run"),
            "goodput": st.column_config.NumberColumn("goodput", format="percent"),
            **{c: st.column_config.NumberColumn(c, format="%.2f") for c in ("sent/s", "requests/s")},
            **{c: st.column_config.NumberColumn(c, format="%.1f") for c in ("output tok/s", "tok/s per user")},
            **{
                c: st.column_config.NumberColumn(_latency_header(c), format="%.1f")
                for c in frame.columns
                if "_ms_" in c
            },
        },
    )


def _latency_header(column: str) -> str:
    """``ttft_ms_p99`` -> ``TTFT p99 (ms)``."""
    group, _, pct = column.partition("_ms_")
    return f"{group.upper()} {pct} (ms)"


def _stop_notes(curve: Any) -> None:
    """Where the sweep stopped at saturation and why, and the points it did not run."""
    for stop in curve.stops:
        st.warning(
            f"Stopped at saturation ([run {stop.run_id}](run?run={stop.run_id})): {escape_markdown(stop.because)}. "
            f"Not run: {escape_markdown(stop.not_run_words)}.",
            icon=":material/block:",
        )
    rows = not_run_rows(curve)
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="lc_not_run")


def curve_view(db: Any, sweep: str, token: tuple[int, int]) -> None:
    """One sweep's curves, knee and table."""
    curve = _curve(db, db.url, sweep, token)
    if not curve.points:
        st.warning(f"No runs are stored under the sweep {escape_markdown(sweep)!s}. ([all sweeps](loadcurve))")
        return
    answer = _search_answer(db, sweep)
    done = curve.done()
    st.caption(
        f"Sweep **{escape_markdown(sweep)}** · {len(curve.points)} runs ({len(done)} done) over "
        f"{curve.unit} · {escape_markdown(curve.knee_words)} · [jobs](jobs?sweep={quote(sweep, safe='')}) · "
        "[all sweeps](loadcurve)"
    )
    if not done:
        st.info("No run of this sweep finished at a known load yet.")
        return
    _stop_notes(curve)
    if len(done) == 1 or all(not math.isfinite(p.offered) for p in done):
        st.info("One load only: a curve needs runs at two or more loads.")
    offered, achieved, pareto = st.tabs(["Against offered load", "Against achieved throughput", "Per user vs per GPU"])
    for tab, against in ((offered, "offered"), (achieved, "achieved")):
        with tab:
            left, right = st.columns(2)
            for column, group in ((left, "ttft_ms"), (right, "tpot_ms")):
                column.plotly_chart(latency_figure(curve, group, against, answer), key=f"lc_{group}_{against}")
    with pareto:
        st.plotly_chart(pareto_figure(curve), key="lc_pareto")
        st.caption("Each point is one load; up and to the right is better (vLLM's plot_pareto view).")
    _points_table(curve)


def main() -> None:
    opened = results_page("Load curves")
    if opened is None:
        return
    db, token = opened
    sweep = (st.query_params.get("sweep") or "").strip()
    try:
        if sweep:
            curve_view(db, sweep, token)
        else:
            sweep_list(db)
    except StorageError as exc:
        st.error(f"The sweep cannot be read: {escape_markdown(exc)}")
        return
    st.caption(
        "The highest load that meets an SLO: the [SLA finder](optimize) on the Optimize page, or "
        "`python -m engine sla --model demo --engine vllm-server --slo chat --wait`."
    )
    share_link("loadcurve")


main()
