"""Runs: every stored run, filtered, sorted and paged in SQL; ``?run=ID`` opens one.

Measured runs only unless ``?predicted=1`` (the serving simulator's predicted runs) or ``?predicted=all``
(both): predicted rows carry the PREDICTED badge and links that say so. Each row names the model, engine and device, the recipe and workload in words (only what
differs from the defaults), the headline figures, the accuracy, the status with its reason
and the noise flags. Ticking rows opens them in Compare or Explore.
"""

from __future__ import annotations

import math

import streamlit as st

from engine.measure import registry
from engine.report.listing import plural, runs_table
from storage.frames import RunQuery, distinct_values, runs_page, sortable
from storage.runs import get_run
from ui.common import database, query_int
from ui.predicted_view import choose_listing
from ui.run_view import missing_run, render_run
from ui.text import escape_markdown

PAGE_SIZE = 50
SORTS = ("created_at", "ttft_ms_p50", "tpot_ms_p50", "output_tokens_per_s", "quality.perplexity", "peak_memory_bytes")
COMPARE_MOST = 8


def _sort_label(key: str) -> str:
    return "date" if key == "created_at" else registry.lookup(key).header


# With the PREDICTED badge shown (predicted runs listed), these columns give it room: still no horizontal scroll.
NARROWER = {"model": 70, "engine": 70, "recipe": 78, "workload": 75, "accuracy": 52}


def _column_config(predicted: bool = False) -> dict:
    """Widths that add up to the content width at 1440 px beside the sidebar (about 945 px): no horizontal scroll.
    Latency headers carry their unit; dates are ISO (``2026-12-03 14:05``); ``predicted``: the badge's column too."""
    c = st.column_config
    config = _columns(c)
    if not predicted:
        return config
    for key, width in NARROWER.items():
        config[key]["width"] = width
    badge = c.TextColumn("kind", width=85, help="PREDICTED: the serving simulator's prediction, not a measurement")
    return {"link": config.pop("link"), "predicted": badge, **config}


def _columns(c) -> dict:
    return {
        "link": c.LinkColumn("run", display_text=r"run\?run=(\d+)", width=40),
        "created_at": c.DatetimeColumn("date (UTC)", format="YYYY-MM-DD HH:mm", width=112),
        "model": c.TextColumn("model", width=75),
        "engine": c.TextColumn("engine", width=75),
        "device": c.TextColumn("device", width=45),
        "recipe": c.TextColumn(
            "recipe", width=118, help="its preset's name, else the knobs that differ from the engine's defaults"
        ),
        "workload": c.TextColumn(
            "workload", width=80, help="prompt→output tokens × requests, then batch size and arrivals"
        ),
        "ttft_ms_p50": c.TextColumn("TTFT [ms]", width=70, help="time to first token, p50 [ms] (sort: Sort by)"),
        "tpot_ms_p50": c.TextColumn("TPOT [ms]", width=70, help="time per output token, p50 [ms]"),
        "output_tokens_per_s": c.TextColumn("tok/s", width=45, help="output tokens per second"),
        "accuracy": c.TextColumn("accuracy", width=80, help="perplexity and KL vs the reference recipe, or a task"),
        "status": c.TextColumn("status", width=90, help="a failed run says why; a done one how many requests failed"),
        "noise": c.TextColumn(
            "noise", width=40, help="why a figure may not stand: contention, steal, too few requests"
        ),
    }


def _query(db) -> RunQuery:
    """Filters, sort and page from the widgets above the table (which runs: ``?predicted=``)."""
    predicted = choose_listing(st, "runs_predicted")
    f1, f2, f3, f4, f5 = st.columns([2, 2, 1, 1, 1])
    text = f1.text_input("Search", key="runs_text", placeholder="name, model, recipe, reason ...")
    picked = {
        column: tuple(
            box.multiselect(
                column, distinct_values(db, column, predicted=predicted), key=f"runs_{column}", placeholder="all"
            )
        )
        for box, column in ((f2, "model"), (f3, "engine"), (f4, "device"), (f5, "status"))
    }
    s1, s2, s3 = st.columns([2, 1, 1])
    options = [k for k in SORTS if k in sortable()]
    sort = s1.selectbox("Sort by", options, format_func=_sort_label, key="runs_sort")
    descending = s2.toggle("largest / newest first", value=sort == "created_at", key=f"runs_desc_{sort}")
    page = s3.number_input("Page", min_value=1, value=1, step=1, key="runs_page")
    return RunQuery(
        text=text or "",
        predicted=predicted,
        sort=sort,
        descending=descending,
        limit=PAGE_SIZE,
        offset=(int(page) - 1) * PAGE_SIZE,
        **picked,
    )


def _open_selected(table, rows: list[int]) -> None:
    ids = [int(table["run_id"].iloc[i]) for i in rows if 0 <= i < len(table)]
    if not ids:
        st.caption("Tick rows to open them together in Compare or Explore.")
        return
    chosen = ",".join(map(str, ids[:COMPARE_MOST]))
    c1, c2 = st.columns(2)
    with c1:
        st.page_link(
            "views/compare.py",
            label=f"Compare the {plural(min(len(ids), COMPARE_MOST), 'selected run')}",
            icon=":material/compare_arrows:",
            query_params={"runs": chosen},
            disabled=len(ids) < 2,
        )
    with c2:
        st.page_link(
            "views/explore.py",
            label=f"Explore the {plural(len(ids), 'selected run')}",
            icon=":material/scatter_plot:",
            query_params={"runs": ",".join(map(str, ids))},
        )
    if len(ids) > COMPARE_MOST:
        st.caption(f"Compare shows at most {COMPARE_MOST} runs: the first {COMPARE_MOST} ticked.")


def runs_list(db) -> None:
    st.title("Runs")
    query = _query(db)
    page, total = runs_page(db, query)
    if total == 0:
        filtered = query.text or any(getattr(query, c) for c in ("model", "engine", "device", "status"))
        st.info(
            "No runs match these filters."
            if filtered
            else "No predicted runs yet: `python -m engine simulate --model demo --engine vllm-server` makes one."
            if query.predicted
            else "No runs yet. Run `python -m engine run --model demo` or launch one from the Launch page."
        )
        return
    table = runs_table(page)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    first = query.offset + 1
    st.caption(
        f"Runs {first:,}–{query.offset + len(table):,} of {plural(total, 'run')} (page {query.offset // PAGE_SIZE + 1} "
        f"of {pages:,}), sorted by {_sort_label(query.sort)}."
    )
    shown = query.predicted is not False  # the badge's column, where predicted runs are listed
    columns = ["run_id"] if shown else ["run_id", "predicted"]
    event = st.dataframe(
        table.drop(columns=columns),
        hide_index=True,
        width="stretch",
        column_config=_column_config(shown),
        on_select="rerun",
        selection_mode="multi-row",
        key="runs_table",
    )
    _open_selected(table, list(event.selection.rows) if event else [])
    _whole_reasons(table)


def _whole_reasons(table) -> None:
    """The status and noise cells are narrow at 1440 px: every failed or flagged run's whole text, below."""
    lines = []
    for row in table.itertuples(index=False):
        status = str(getattr(row, "status", "") or "")
        parts = [t for t in (status if status != "done" else "", str(getattr(row, "noise", "") or "")) if t]
        if parts:
            lines.append(f"- **run {row.run_id}**: " + " · ".join(escape_markdown(p) for p in parts))
    if lines:
        st.markdown(f"**Failed, partly failed or flagged on this page ({len(lines)}):**\n" + "\n".join(lines))


db = database()
if db is not None:
    run_id, problem = query_int("run")
    if problem:
        st.warning(f"{problem}; showing all runs instead.")
    elif run_id is not None:
        run = get_run(db, run_id)
        if run is None:
            st.warning(missing_run(db, run_id))
        else:
            render_run(run)
            st.divider()
    runs_list(db)
