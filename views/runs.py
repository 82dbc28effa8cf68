"""Runs: every stored run; ``?run=ID`` opens one."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from storage.frames import runs_frame
from storage.runs import get_run
from ui.common import database, query_int
from ui.run_view import render_run


def reasons(frame: pd.DataFrame) -> list[str]:
    """Each run's reason: its error, "no reason recorded" for a run that did not finish, else empty."""
    return [
        str(error) if isinstance(error, str) and error else ("" if status == "done" else "no reason recorded")
        for status, error in zip(frame["status"], frame["error"], strict=True)
    ]


db = database()
if db is not None:
    run_id, problem = query_int("run")
    if problem:
        st.warning(f"{problem}; showing all runs instead.")
    elif run_id is not None:
        run = get_run(db, run_id)
        if run is None:
            st.warning(f"There is no run {run_id}. It may have been deleted, or the link is from another database.")
        else:
            render_run(run)
            st.divider()

    st.title("Runs")
    frame = runs_frame(db, limit=500)
    if frame.empty:
        st.info("No runs yet. Run `python -m engine run --model demo` or launch one from the Launch page.")
    else:
        frame = frame.assign(link=[f"run?run={i}" for i in frame["run_id"]], reason=reasons(frame))
        cols = [
            "link",
            "created_at",
            "status",
            "name",
            "model",
            "engine",
            "device",
            "ttft_ms_p50",
            "tpot_ms_p50",
            "itl_ms_p50",
            "e2el_ms_p50",
            "output_tokens_per_s",
            "error_rate",
            "noise",
            "reason",
        ]
        st.dataframe(
            frame[cols],
            hide_index=True,
            width="stretch",
            column_config={
                "link": st.column_config.LinkColumn("run", display_text=r"run\?run=(\d+)"),
                "ttft_ms_p50": st.column_config.NumberColumn("TTFT p50 [ms]", format="%.1f"),
                "tpot_ms_p50": st.column_config.NumberColumn("TPOT p50 [ms]", format="%.1f"),
                "itl_ms_p50": st.column_config.NumberColumn("ITL p50 [ms]", format="%.1f"),
                "e2el_ms_p50": st.column_config.NumberColumn("E2EL p50 [ms]", format="%.1f"),
                "output_tokens_per_s": st.column_config.NumberColumn("tokens/s", format="%.1f"),
                "error_rate": st.column_config.NumberColumn(
                    "failed requests", format="percent", help="share of the measured requests that failed"
                ),
                "noise": st.column_config.TextColumn(
                    "noise", help="why a figure may not stand: contention, steal, too few requests, drift"
                ),
                "reason": st.column_config.TextColumn("reason / note"),
            },
        )
