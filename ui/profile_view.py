"""The profile section of a run's page: the top operators of the profiled decode steps and the
Chrome/Perfetto trace to download (``workload.profile_steps``; engine/run/profile.py).

Only a trace under this machine's ``<data_dir>/profiles/`` is offered for download: the path
comes from the database, and the page never serves another file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from engine.settings import get_settings
from storage.series import get_series
from ui.text import code_span, escape_markdown

COLUMNS = ["operator", "self time [ms]", "per step [ms]", "calls", "share [%]"]


def top_table(record: dict[str, Any]) -> pd.DataFrame:
    """One row per operator: self time over the profiled steps and per step, calls, share of all operators."""
    steps = max(int(record.get("steps") or 1), 1)
    rows = [
        {
            "operator": row.get("name"),
            "self time [ms]": round(float(row.get("self_ms") or 0.0), 2),
            "per step [ms]": round(float(row.get("self_ms") or 0.0) / steps, 3),
            "calls": row.get("calls"),
            "share [%]": round(float(row.get("share_pct") or 0.0), 1),
        }
        for row in record.get("top") or []
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def trace_file(record: dict[str, Any], data_dir: Path | None = None) -> Path | None:
    """The record's trace, when it is a ``.json.gz`` file under ``<data_dir>/profiles/`` that exists here."""
    name = record.get("trace_file")
    if not name:
        return None
    folder = ((data_dir or get_settings().data_dir) / "profiles").resolve()
    path = Path(str(name)).resolve()
    if not path.is_relative_to(folder) or not path.name.endswith(".json.gz") or not path.is_file():
        return None
    return path


def caption(record: dict[str, Any]) -> str:
    """``20 decode steps · batch 1 · cpu activities · 91 ms per step under the profiler``."""
    parts = [f"{record.get('steps')} decode steps", f"batch {record.get('batch_size', '?')}"]
    parts.append(" + ".join(record.get("activities") or []) + " activities")
    if record.get("step_ms_profiled"):
        parts.append(f"{record['step_ms_profiled']:.1f} ms per step under the profiler (it slows every step)")
    return " · ".join(parts) + ". Share: of the self time of every operator, as in torch's own table."


def render(db: Any, run: Any) -> None:
    """The section, for runs with a profile phase (nothing for the others)."""
    record = get_series(db, run.id, "profile")
    if record is None:
        return
    st.subheader("Profile")
    if not record.get("available", True):
        st.info(escape_markdown(str(record.get("note") or "no profile was recorded")) + ".")
        return
    st.caption(caption(record))
    st.dataframe(top_table(record), hide_index=True, key="profile_top")
    path = trace_file(record)
    if path is None:
        where = record.get("trace_file")
        st.caption(
            f"The trace {code_span(str(where))} is not in this machine's data folder."
            if where
            else "No trace file was written."
        )
        return
    st.download_button(
        "Download the trace (Chrome/Perfetto, .json.gz)",
        data=path.read_bytes(),
        file_name=path.name,
        mime="application/gzip",
        key="profile_trace",
        help="open it in https://ui.perfetto.dev or chrome://tracing",
    )
