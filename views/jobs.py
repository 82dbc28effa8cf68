"""Jobs: every queued, running and finished job with live progress.

The list refreshes itself every second (``st.fragment(run_every=...)``) without a
page rerun. Cancel (queued, running) and Retry (failed, cancelled) need the operator
role: disabled with the reason for a signed-in viewer, hidden in viewer mode. Each job
says who submitted it, who cancelled it and who deleted its run. ``?sweep=NAME`` shows one sweep; ``?status=running`` one status.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import streamlit as st

from engine.report.recipes import recipe_in_words
from storage import StorageError
from ui import auth
from ui.common import database
from ui.text import code_span, escape_markdown

REFRESH_S = 1.0
STATUS_ICONS = {
    "queued": ":material/schedule:",
    "running": ":material/progress_activity:",
    "done": ":material/check_circle:",
    "failed": ":material/error:",
    "cancelled": ":material/cancel:",
}


NOT_RUN = "not run:"  # the reason of a sweep's point its sweep stopped before (engine/jobs/saturation_stop.py)


def _queued_note(note: str | None) -> str:
    """What a queued job's note adds: it stops at saturation, or it was re-queued after its worker was lost."""
    from storage.jobs import STOPS_AT_SATURATION

    if note == STOPS_AT_SATURATION:
        return f" · {note}"
    return " (re-queued after its worker was lost)" if note else ""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _describe(spec: dict[str, Any]) -> str:
    """The model and the recipe in words: only the knobs that differ from the engine's defaults (and the workload)."""
    model = (spec.get("model") or {}).get("source", "?")
    return f"{model} · {recipe_in_words({k: v for k, v in spec.items() if k != 'device'})}"


def _act(action: str, job_id: int) -> None:
    from storage import jobs

    why_not = auth.cannot(action)  # asked again: the button is not the only way here
    if why_not:
        st.toast(f"Job {job_id}: {escape_markdown(why_not)}")
        return
    db = database()
    if db is None:
        return
    try:
        if action == "cancel":
            job = jobs.cancel(db, job_id, by=auth.actor())
            st.toast(f"Job {job_id}: " + ("cancelled" if job and job.status == "cancelled" else "cancel requested"))
        else:
            new_id = jobs.retry(db, job_id, by=auth.actor())
            st.toast(f"Job {job_id} queued again as job {new_id}" if new_id else f"Job {job_id} cannot be retried")
    except StorageError as exc:
        st.toast(f"Could not {action} job {job_id}: {escape_markdown(exc)}")


def _who_line(job: Any) -> str | None:
    """Who submitted the job, who cancelled it, who deleted its run (what is known)."""
    parts = [
        f"{what} by {name}"
        for what, name in (
            ("submitted", job.submitted_by),
            ("cancelled", job.cancelled_by),
            (f"run {job.run_id} deleted", job.deleted_by),
        )
        if name
    ]
    return " · ".join(parts).replace("`", "") or None


def _where(job: Any) -> None:
    """The Ray node a job runs or ran on (its log's header), linked to the Ray dashboard where one is configured."""
    from engine.jobs import placement
    from engine.settings import get_settings

    where = placement.from_log_tail(job.log_tail)
    words = placement.in_words(where)
    if words:
        link = placement.dashboard_link(where, get_settings().ray_dashboard_url)
        st.caption(f"on {code_span(words)}" + (f" · [Ray dashboard]({link})" if link else ""))


# action -> (label, the statuses it applies to, its help when allowed)
ACTIONS = {
    "cancel": ("Cancel", ("queued", "running"), "SIGTERM, then SIGKILL after a grace period"),
    "retry": ("Retry", ("failed", "cancelled"), None),
}


def _actions(job: Any, rights: dict[str, str | None], hidden: bool) -> None:
    """Cancel (queued, running) and Retry (failed, cancelled); disabled with the reason when not allowed."""
    if hidden:
        return
    for action, (label, statuses, help_text) in ACTIONS.items():
        if job.status not in statuses:
            continue
        st.button(
            label,
            key=f"{action}_{job.id}",
            on_click=_act,
            args=(action, job.id),
            disabled=rights[action] is not None or (action == "cancel" and job.cancel_requested),
            help=rights[action] or help_text,
        )


# Start-up lines of libraries that say nothing about the job (jobs before issue 26 logged them).
_NOISE = re.compile(r"^(Failed to load .*torchao/_C|W\d{4} .*is now natively supported by torch\.compile)")


def readable_log(tail: str) -> str:
    """A job's log tail without the libraries' harmless start-up lines (torchao's CUDA-only kernels)."""
    return "\n".join(line for line in tail.splitlines() if not _NOISE.match(line))


def queued_words(job: Any, busy: dict[str, int], served: set[str]) -> str:
    """Why a queued job waits: the job before it on its device, a worker about to claim it, or no worker."""
    again = _queued_note(job.progress_note)
    if job.device in busy and busy[job.device] != job.id:
        return f"queued behind job {busy[job.device]}, running on {job.device} (one job per device at a time){again}"
    if job.device in served:
        return f"queued: the worker serving {job.device} starts it within seconds{again}"
    return f"waiting for a worker that serves {job.device}: none is running (`python -m engine worker`){again}"


def running_words(job: Any) -> str:
    """The progress line of a running job; a job whose phase is done is still being stored, and says so."""
    phase = job.phase or "starting"
    if phase == "done" or job.progress >= 1.0:
        phase = "finishing: storing the run"
    eta = f" · about {_duration(job.eta_s)} left" if job.eta_s is not None else ""
    text = f"{phase} · {job.progress * 100:.0f}% · elapsed {_duration(job.elapsed_s)}{eta}"
    return text + (" · cancelling" if job.cancel_requested else "")


def render_job(
    job: Any,
    read_only: bool,
    rights: dict[str, str | None] | None = None,
    queue: tuple[dict[str, int], set[str]] = ({}, set()),
) -> None:
    """One job: status, phase, progress bar, elapsed/ETA, reason, run link, log tail, actions
    (hidden when ``read_only``; disabled with ``rights``' reason where not allowed); ``queue`` is
    (device -> running job id, devices live workers serve), for why a queued job waits."""
    rights = rights or {"cancel": None, "retry": None}
    with st.container(border=True):
        head, actions = st.columns([5, 1])
        with head:
            title = (
                f"**Job {job.id}**"
                + (f" · {escape_markdown(job.name)}" if job.name else "")
                + (f" · sweep *{escape_markdown(job.sweep)}*" if job.sweep else "")
            )
            st.markdown(f"{STATUS_ICONS.get(job.status, '')} {title} · `{job.status}` on `{job.device}`")
            st.caption(escape_markdown(_describe(job.spec)))
            who = _who_line(job)
            if who:
                st.caption(code_span(who))
            _where(job)
        with actions:
            _actions(job, rights, read_only)
        if job.status == "running":
            st.progress(min(1.0, max(0.0, job.progress)), text=running_words(job))
            if job.progress_note:
                st.caption(escape_markdown(job.progress_note))
        elif job.status == "queued":
            st.caption(queued_words(job, *queue))
        else:
            st.caption(
                f"{job.status} after {_duration(job.elapsed_s)}"
                + (f" · attempt {job.attempts}" if job.attempts > 1 else "")
            )
        if job.error and job.status != "done" and job.error.startswith(NOT_RUN):
            st.info(escape_markdown(job.error), icon=":material/block:")  # its sweep stopped before it
        elif job.error and job.status != "done":
            st.error(escape_markdown(job.error), icon=":material/error:")
        if job.run_id is not None:
            st.markdown(f"[Open run {job.run_id}](run?run={job.run_id})")
        if job.log_tail:
            with st.expander("Log tail"):
                st.code(readable_log(job.log_tail)[-4000:], language=None)


@st.fragment(run_every=REFRESH_S)
def live_jobs(statuses: list[str], sweep: str | None, read_only: bool, rights: dict[str, str | None]) -> None:
    """The job list; reruns on its own every REFRESH_S seconds."""
    from engine.jobs.submission import live_workers
    from storage import jobs

    db = database()
    if db is None:
        return
    try:
        rows = jobs.list_jobs(db, limit=100, statuses=statuses or None, sweep=sweep)
        workers = live_workers(db)
        busy = jobs.busy_devices(db)
    except StorageError as exc:
        st.error(f"The jobs cannot be read: {escape_markdown(exc)}")
        return
    counts = {s: sum(1 for j in rows if j.status == s) for s in STATUS_ICONS}
    st.caption(" · ".join(f"{n} {s}" for s, n in counts.items() if n) or "no jobs")
    if workers:
        st.caption("Live workers: " + "; ".join(f"{w.id} ({', '.join(w.devices)})" for w in workers))
    else:
        st.warning(
            "No live worker: queued jobs wait until one starts (`python -m engine worker`; make run starts one)."
        )
    if not rows:
        st.info("No jobs yet. Launch one from the Launch page or with `python -m engine submit --model demo`.")
        return
    served = {d for w in workers for d in w.devices}
    for job in rows:
        render_job(job, read_only, rights, (busy, served))


def page() -> None:
    st.title("Jobs")
    who = auth.current()
    read_only = who.viewer_mode
    rights = {action: auth.cannot(action, who) for action in ("cancel", "retry")}
    if read_only:
        st.info("Viewer mode: jobs are shown read-only.", icon=":material/visibility:")
    elif rights["cancel"]:
        st.info(f"Read-only: {rights['cancel']} (retrying too).", icon=":material/visibility:")
    if database() is None:
        return
    raw_status = st.query_params.get("status") or ""
    statuses = [s for s in raw_status.split(",") if s in STATUS_ICONS]
    sweep = st.query_params.get("sweep") or None
    if sweep:
        curve = f"loadcurve?sweep={quote(sweep, safe='')}"
        st.caption(f"Sweep: **{escape_markdown(sweep)}** ([load curves]({curve}) · [all jobs](/jobs))")
    live_jobs(statuses, sweep, read_only, rights)


page()
