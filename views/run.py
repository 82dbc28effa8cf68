"""Run: one stored run (``?run=ID``): cards, accuracy (ui.accuracy_view via render_run), distributions
with small-sample warnings, time series over the run, its traffic (ui.traffic_view), requested vs actual
tokens, timeline, config, provenance, log; failed runs show their reason. A predicted run (the serving
simulator's) is titled so, opens with its banner (calibration, band, hardware, TP), and says "not predicted"
where a measured run shows its client, diagnostics (telemetry, energy), server metrics, accuracy and memory."""

from __future__ import annotations

import streamlit as st

from engine.report.compare import recipe_in_words
from engine.report.naming import frame_run_names
from engine.report.results import noise_words
from engine.report.runlike import is_predicted
from ui import auth, client_view, profile_view, server_metrics_view, traffic_view
from ui.common import query_int
from ui.diagnostics_view import render_diagnostics
from ui.predicted_view import not_predicted
from ui.run_view import (
    cached_aggregates,
    cached_endpoints,
    cached_requests,
    cached_run,
    cached_runs_frame,
    distributions_section,
    missing_run,
    over_time_section,
    render_run,
    results_page,
    share_link,
    tokens_section,
)
from ui.text import code_span, escape_markdown


def _pick_run(db, token) -> None:
    frame = cached_runs_frame(db, db.url, token, limit=500)  # the picker lists the newest 500
    if frame.empty:
        st.info("No runs yet. Run `python -m engine run --model demo` or launch one from the Launch page.")
        return
    newest = frame.head(500)
    options = newest["run_id"].tolist()
    labels = {
        int(run_id): f"{name}{'' if status == 'done' else f' ({status})'}"
        for run_id, name, status in zip(options, frame_run_names(newest), newest["status"], strict=True)
    }
    choice = st.selectbox(
        "Open a run", options, index=None, format_func=lambda i: labels[int(i)], placeholder="choose a run"
    )
    if choice is not None:
        st.query_params["run"] = str(choice)
        st.rerun()


def _log(db, run) -> None:
    if not run.job_id:
        return
    try:
        from storage.jobs import get_job
    except ImportError:
        return
    job = get_job(db, run.job_id)
    if job is not None and getattr(job, "log_tail", None):
        with st.expander(f"Log (job {run.job_id})", expanded=run.status != "done"):
            st.code(job.log_tail, language=None)


def _delete(db, run) -> None:
    who = auth.current()
    if who.viewer_mode:
        return
    why_not = auth.cannot("delete", who)
    with st.expander("Delete run", icon=":material/delete:"):
        if why_not:
            st.caption(f"{why_not[0].upper()}{why_not[1:]}.")
        sure = st.checkbox(f"Yes, delete run {run.id} and its raw stamps", key="confirm_delete", disabled=bool(why_not))
        if st.button("Delete run", type="primary", disabled=not sure or bool(why_not), help=why_not):
            from storage.runs import delete_run

            if auth.cannot("delete"):  # asked again: the button is not the only way here
                return
            delete_run(db, run.id, by=auth.actor())
            st.query_params.clear()
            st.switch_page("views/runs.py")


def noise_badges(metrics: dict | None) -> list[tuple[str, str]]:
    """(badge text, colour) per noise flag: orange for a busy machine, grey for a thin run."""
    return [(text, "orange" if kind == "machine" else "gray") for text, kind in noise_words(metrics)]


def _linked_run(db, token):
    """The run ``?run=`` names, or None after saying why (under the page's plain title) and offering a picker."""
    run_id, problem = query_int("run")
    run = cached_run(db, db.url, run_id, token) if run_id is not None and not problem else None
    if run is not None:
        return run
    st.title("Run")
    if problem:
        st.warning(f"{problem}. Run links look like `run?run=12`.")
    elif run_id is not None:
        st.warning(missing_run(db, run_id))
    _pick_run(db, token)
    return None


def _measured_sections(db, token, run, agg) -> None:
    """What only a measured run has: the client's own lag, diagnostics (telemetry, energy), server metrics, profile;
    a predicted run says so instead."""
    if is_predicted(run):
        for section in ("Client", "Diagnostics: telemetry and energy", "Server metrics"):
            not_predicted(section)
        return
    requests = cached_endpoints(db, db.url, run.id, token, agg) if agg is not None else []  # first/last stamps
    render_diagnostics(db, run, requests)  # findings, energy per token, telemetry charts (ui/diagnostics_view.py)
    if run.status == "done":
        server_metrics_view.render(db, run, requests)  # a serving engine's /metrics beside the client's view
        profile_view.render(db, run)  # top operators and the trace of the profile phase


def main() -> None:
    opened = results_page(None)  # the title says whether the run was measured or predicted
    if opened is None:
        return
    db, token = opened
    run = _linked_run(db, token)
    if run is None:
        return
    st.title("Predicted run" if is_predicted(run) else "Run")
    done = run.status == "done"
    agg = cached_aggregates(db, db.url, run.id, token) if done else None  # what the figures draw from
    old = done and "ci" not in (run.metrics or {})  # stored before intervals: computed from its raw requests
    render_run(run, cached_requests(db, db.url, run.id, token) if old else None, agg)
    for text, color in noise_badges(run.metrics):
        st.badge(text, icon=":material/warning:", color=color)
    st.markdown(f"**Recipe:** {escape_markdown(run.model)} · {escape_markdown(recipe_in_words(run.spec, run.engine))}")
    if run.sweep:
        st.caption(f"part of sweep {code_span(run.sweep)}")
    if run.submitted_by:
        st.caption(f"launched by {code_span(run.submitted_by)}")
    # the page's sections, in order (each shows nothing when it has nothing to show)
    if not is_predicted(run):
        client_view.render(run, agg)  # the client's own lag: did it, not the server, set the pace?
    distributions_section(run, agg)
    over_time_section(run, agg)
    traffic_view.render_run(run, agg)  # the source, TTFT per turn of sessions, send minus due for schedules
    tokens_section(run, agg)
    _measured_sections(db, token, run, agg)
    _log(db, run)
    _links(run)
    _delete(db, run)


def _links(run) -> None:
    st.page_link(
        "views/compare.py",
        label="Compare with other runs",
        icon=":material/compare_arrows:",
        query_params={"runs": str(run.id), "baseline": str(run.id)},
    )
    share_link("run")


main()
