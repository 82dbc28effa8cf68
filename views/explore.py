"""Explore: any latency/throughput metric against accuracy or another metric, with the Pareto front.

Every choice (view, axes, colour, symbol, filters) lives in the URL query parameters, so a
copied link reproduces the view. Clicking a point opens its run. Fronts are measured; ``?predicted=1``
overlays the serving simulator's predicted runs matching the same filters, as hollow diamonds labelled
predicted that never enter a front (off by default).
"""

from __future__ import annotations

from datetime import date
from functools import partial
from urllib.parse import quote

import pandas as pd
import streamlit as st

from engine.measure import registry
from engine.report.explore_report import standing
from engine.report.export import explore_html, permalink, table_csv
from engine.report.figures import (
    LATENCY_METRICS,
    axis_label,
    explore_scatter,
    figure_words,
    frame_hints,
    metric_name,
    sweep_curves,
)
from engine.report.fronts import Fronts, front_groups, pareto_fronts, with_intervals
from engine.report.listing import EXPLORE_POINTS, axis_choices, colour_columns, default_colour, plural
from engine.report.naming import frame_run_names
from engine.settings import get_settings
from engine.spec.forms import label as knob_label
from storage.frames import RunQuery, count, distinct_values, query_frame
from ui.common import query_int_list
from ui.predicted_view import cached_predicted, overlay_predicted
from ui.run_view import current_params, results_page, share_link
from ui.text import escape_markdown, shown

FILTERS = (("model", "Model"), ("device", "Device"), ("engine", "Engine"), ("sweep", "Sweep"))
GROUP_COLUMNS = ("engine", "model", "device", "device_name", "sweep")
NONE = ""
MAX_POINTS = EXPLORE_POINTS  # the newest matching runs drawn; a filter narrows to the others


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def _frame(_db, db_url: str, token: tuple[int, int], query: RunQuery) -> tuple[pd.DataFrame, int]:
    """The finished runs matching the filters (filtered in SQL, newest ``MAX_POINTS``) and how many match."""
    return query_frame(_db, query), count(_db, query)


def _label(column: str, hints: dict[str, str] | None = None) -> str:
    if column == NONE:
        return "(none)"
    if column in GROUP_COLUMNS:
        return column.replace("_", " ")
    if column.startswith(("recipe.", "workload.")):  # a knob: its label in words, as on Launch
        field = column.split(".", 1)[1]
        return knob_label(field)
    return metric_name(column, hints)


def _select(container, label: str, options: list[str], param: str, default: str, hints=None) -> str:
    """A selectbox whose value lives in ``st.query_params[param]`` (a metric in any spelling the registry reads)."""
    raw = st.query_params.get(param)
    raw = registry.canonical(raw) if raw and raw not in options else raw
    value = raw if raw in options else (default if default in options else options[0])
    key = f"explore_{param}"
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]
    chosen = container.selectbox(
        label, options, index=options.index(value), format_func=partial(_label, hints=hints), key=key
    )
    st.query_params[param] = chosen
    return chosen


def _multi(container, label: str, options: list[str], param: str) -> list[str]:
    """A multiselect filter whose values live in repeated ``param`` query parameters."""
    wanted = [v for v in st.query_params.get_all(param) if v in options]
    key = f"explore_{param}"
    if key in st.session_state and not set(st.session_state[key]) <= set(options):
        del st.session_state[key]
    chosen = container.multiselect(label, options, default=wanted, key=key, placeholder="all")
    if chosen:
        st.query_params[param] = chosen
    elif param in st.query_params:
        del st.query_params[param]
    return chosen


def _date(container, label: str, param: str) -> date | None:
    raw = st.query_params.get(param)
    try:
        value = date.fromisoformat(raw) if raw else None
    except ValueError:
        st.warning(f"Ignoring the date filter {param}={shown(raw)}: dates look like 2026-11-30.")
        value = None
    chosen = container.date_input(label, value=value, key=f"explore_{param}", format="YYYY-MM-DD")
    if chosen:
        st.query_params[param] = chosen.isoformat()
    elif param in st.query_params:
        del st.query_params[param]
    return chosen or None


def chosen_query(db) -> RunQuery:
    """The sidebar filters (kept in the URL) as one SQL query over the finished runs."""
    picked: dict[str, tuple[str, ...]] = {}
    with st.sidebar:
        st.subheader("Filters")
        for column, label in FILTERS:
            picked[column] = tuple(_multi(st, label, distinct_values(db, column, status="done"), column))
        since = _date(st, "From (UTC)", "since")
        until = _date(st, "Until (UTC)", "until")
        quiet = st.checkbox(
            "hide runs measured under contention",
            value=st.query_params.get("quiet") == "1",
            key="explore_quiet",
            help="other processes used the CPU or GPU, or the hypervisor stole CPU time, during the measured phase",
        )
    if quiet:
        st.query_params["quiet"] = "1"
    elif "quiet" in st.query_params:
        del st.query_params["quiet"]
    run_ids, bad = query_int_list("runs")
    if bad:
        st.warning(f"Ignoring {', '.join(shown(b) for b in bad)} in runs=: run ids are whole numbers.")
    return RunQuery(
        status=("done",), run_ids=tuple(run_ids), since=since, until=until, quiet=quiet, limit=MAX_POINTS, **picked
    )


def _point_run_id(point: dict, fig) -> int | None:
    """The run id behind a selected point: looked up in the figure, else read from the point's customdata."""
    try:
        return int(fig.data[int(point["curve_number"])].customdata[int(point["point_index"])][0])
    except (KeyError, IndexError, TypeError, ValueError):
        pass
    data = point.get("customdata")
    if isinstance(data, dict):  # a typed array serialised as {"0": id}
        data = list(data.values())
    if isinstance(data, (list, tuple)) and data:
        data = data[0]
    try:
        return int(data)
    except (TypeError, ValueError):
        return None


def _open_clicked(event, fig) -> None:
    points = (event or {}).get("selection", {}).get("points", []) if event else []
    ids: list[int] = []
    for p in points:
        run_id = _point_run_id(p, fig)
        if run_id is not None and run_id not in ids:
            ids.append(run_id)
    if len(ids) == 1:
        st.switch_page("views/run.py", query_params={"run": str(ids[0])})
    elif ids:
        st.page_link(
            "views/compare.py",
            label=f"Compare the {min(len(ids), 8)} selected runs",
            icon=":material/compare_arrows:",
            query_params={"runs": ",".join(map(str, ids[:8]))},
        )


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def _uncertain(_db, db_url: str, token: tuple[int, int], run_ids: tuple[int, ...]) -> tuple[dict, dict]:
    """Each shown run's stored (metrics, quality) for its intervals, and the runs measured as Optimize trials."""
    from storage.frames import figure_records
    from storage.studies import trial_runs

    return figure_records(_db, run_ids), trial_runs(_db)


def with_uncertainty(db, token, frame: pd.DataFrame, x: str, y: str) -> tuple[pd.DataFrame, dict]:
    """The frame with each run's 95 % interval of ``x`` and ``y`` and, for Optimize's runs, their trial; and
    each run's stored (metrics, quality), for the verdicts between them."""
    if frame.empty:
        return frame, {}
    records, trials = _uncertain(db, db.url, token, tuple(int(i) for i in frame["run_id"]))
    out = with_intervals(frame, [x, y], records)
    out["trial"] = out["run_id"].map(lambda i: trials.get(int(i)))
    return out, records


def _front_warning(fronts: Fronts) -> None:
    if len(fronts.groups) > 1:
        st.warning(
            "These runs differ in more than their recipe ("
            + escape_markdown("; ".join(fronts.differences) or "workload")
            + "): one front is drawn per model and workload, each in its own colour. Filter by model, "
            "or tick runs of one workload on the Runs page, to see a single front.",
            icon=":material/warning:",
        )
    if fronts.approximate:
        st.caption(
            f"{plural(len(fronts.approximate), 'group')} had too many runs near the front to judge pair by pair: "
            "there, a run is off the front when another beats it beyond both runs' intervals."
        )


def _front_table(frame: pd.DataFrame, fronts: Fronts, x: str, y: str) -> None:
    front = fronts.run_ids()
    st.subheader(f"Pareto front: {plural(len(front), 'run')}")
    if not front:
        st.caption("No run has both values.")
        return
    rows = frame[frame["run_id"].isin(front)].sort_values(x)
    hints = frame_hints(frame)
    table = pd.DataFrame(index=rows.index)
    table[_label(x, hints)] = figure_words(rows, x, hints, labelled=False)  # one format, with the 95 % CI
    table[_label(y, hints)] = figure_words(rows, y, hints, labelled=False)
    for column in ("model", "engine", "device"):
        if column in rows.columns:
            table[column] = rows[column]
    table.insert(0, "run name", frame_run_names(rows))  # its recipe in words; never "None"
    table.insert(1, "front", [standing(int(i), fronts) for i in rows["run_id"]])
    if len(fronts.groups) > 1:
        table.insert(4, "model · workload", [fronts.labels.get(g, g) for g in front_groups(rows)])
    if "trial" in rows.columns:
        table["Optimize trial"] = rows["trial"].fillna("")
    table.insert(0, "open", [f"run?run={i}" for i in rows["run_id"]])  # the one run-id column: a link
    if "error_rate" in frame.columns:
        table["failed requests"] = frame.loc[table.index, "error_rate"]
    st.dataframe(
        table,
        hide_index=True,
        column_config={
            "open": st.column_config.LinkColumn("run", display_text=r"run\?run=(\d+)"),
            "failed requests": st.column_config.NumberColumn("failed requests", format="percent"),
        },
    )
    st.page_link(
        "views/compare.py",
        label="Compare the front",
        icon=":material/compare_arrows:",
        query_params={"runs": ",".join(map(str, rows["run_id"].head(8)))},
    )


def _scatter_words(measured: pd.DataFrame, x: str, y: str, fronts: Fronts, predicted: int) -> str:
    """The scatter's caption: how many runs are drawn, what the bars, rings, crosses and diamonds mean."""
    shown = int((measured[x].notna() & measured[y].notna()).sum())
    paired = (
        " Perplexity is compared paired, on the same text: it has no bars (each run's own interval, much wider "
        "than the difference between two runs, is on hover)."
        if fronts.paired
        else ""
    )
    hollow = (
        f" Hollow diamonds: {plural(predicted, 'predicted run')} (the serving simulator's, not measured), never on "
        "a front."
        if predicted
        else ""
    )
    return (
        f"{shown:,} of {plural(len(measured), 'run')} {'has' if shown == 1 else 'have'} both values "
        "(the others are left out). Bars: each run's 95 % interval (also on hover). A run leaves the front only "
        "when another is significantly better on one axis and not significantly worse on the other, by the "
        "verdict Compare gives that pair; front runs are ringed when they are tied (no significant difference, "
        "within ± 5 %) or when there is not enough data to tell them apart; the line joins clear trade-offs. "
        "Crosses mark Optimize trials. Click a point to open its run; box- or lasso-select several to compare them."
        + paired
        + hollow
    )


def scatter_view(db, token, frame: pd.DataFrame, predicted: pd.DataFrame | None = None) -> None:
    """The scatter of the measured runs (``frame``) with their fronts, the ``predicted`` runs overlaid apart."""
    predicted = predicted if predicted is not None else frame.iloc[0:0]
    perf, quality = axis_choices(frame)
    hints = frame_hints(frame)
    groups = [NONE, *colour_columns(frame)]
    if not perf:
        st.info("No latency or throughput figures among these runs yet.")
        return
    c1, c2, c3, c4 = st.columns(4)
    x = _select(c1, "x axis (latency / throughput)", perf, "x", "tpot_ms_p50", hints)
    y_default = (
        "quality.perplexity" if "quality.perplexity" in quality else (quality[0] if quality else "output_tokens_per_s")
    )
    y = _select(c2, "y axis (accuracy or another metric)", quality + perf, "y", y_default, hints)
    plotted = frame[frame[x].notna() & frame[y].notna()] if not frame.empty else frame
    color = _select(c3, "Colour by", groups, "color", default_colour(plotted))  # what varies among the points
    symbol = _select(c4, "Symbol by", groups, "symbol", NONE)
    if frame.empty:
        st.info("No finished runs match these filters.")
        return
    frame, records = with_uncertainty(db, token, frame, x, y)
    fronts = pareto_fronts(frame, x, y, hints, records=records)  # Compare's verdict on every pair
    measured = frame
    frame = pd.concat([frame, predicted], ignore_index=True) if len(predicted) else frame  # drawn apart, hollow
    fig = explore_scatter(frame, x, y, color or None, symbol or None, fronts=fronts)
    _front_warning(fronts)
    st.caption(_scatter_words(measured, x, y, fronts, len(predicted)))
    event = st.plotly_chart(fig, on_select="rerun", selection_mode=("points", "box", "lasso"), key="explore_chart")
    _open_clicked(event, fig)
    _front_table(measured, fronts, x, y)
    link = permalink(get_settings().public_base_url, "explore", current_params())
    e1, e2 = st.columns(2)
    e1.download_button(
        "Download HTML report",
        data=partial(explore_html, frame, x, y, color or None, symbol or None, link, records=records),
        file_name="latencylab-explore.html",
        mime="text/html",
        icon=":material/download:",
    )
    e2.download_button(
        "Download CSV",
        data=partial(table_csv, frame),
        file_name="latencylab-runs.csv",
        mime="text/csv",
        icon=":material/download:",
    )


def sweeps_view(frame: pd.DataFrame) -> None:
    swept = frame[frame["sweep"].notna()] if "sweep" in frame.columns else frame.iloc[0:0]
    c1, c2 = st.columns(2)
    x = _select(c1, "x axis (load)", ["requests_per_s", "output_tokens_per_s"], "sx", "requests_per_s")
    y = _select(
        c2,
        "y axis (latency)",
        [c for c in LATENCY_METRICS if c in frame.columns] or ["ttft_ms_p99"],
        "sy",
        "ttft_ms_p99",
    )
    if swept.empty:
        st.info(
            "No sweeps among these runs. A sweep is a set of runs stored with the same sweep name "
            "(e.g. one per request rate or concurrency)."
        )
        return
    st.plotly_chart(sweep_curves(swept, x, y), key="sweep_chart")
    st.caption(
        f"{plural(swept['sweep'].nunique(), 'sweep')}, {plural(len(swept), 'run')}; "
        f"{axis_label(x)} against {axis_label(y)}."
    )
    links = [
        f"[{escape_markdown(n)}](loadcurve?sweep={quote(str(n), safe='')})" for n in sorted(swept["sweep"].unique())
    ]
    st.markdown("Load curves (knee, SLO, goodput): " + " · ".join(links[:30]))


def main() -> None:
    opened = results_page("Explore")
    if opened is None:
        return
    db, token = opened
    if token[0] == 0:
        st.info("No runs yet. Run `python -m engine run --model demo` or launch one from the Launch page.")
        return
    views = {"scatter": "Trade-offs (Pareto)", "sweeps": "Latency vs throughput (sweeps)"}
    raw = st.query_params.get("view")
    view = (
        st.segmented_control(
            "View", list(views), format_func=views.get, key="explore_view", default=raw if raw in views else "scatter"
        )
        or "scatter"
    )
    st.query_params["view"] = view
    query = chosen_query(db)
    overlay = overlay_predicted()
    data, matching = _frame(db, db.url, token, query)
    if matching > len(data):
        st.caption(
            f"Showing the newest {len(data):,} of {matching:,} matching runs; filter (model, dates, ...) to see others."
        )
    if data.empty:
        st.info("No finished runs match these filters.")
    elif view == "sweeps":
        sweeps_view(data)
    else:
        scatter_view(db, token, data, cached_predicted(db, db.url, token, query) if overlay else None)
    share_link("explore")


main()
