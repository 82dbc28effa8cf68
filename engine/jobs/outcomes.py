"""How a job's process ended, in words: the one-line reasons, the final status, and the
failed run a job gets when its process stored none (DESIGN: "a crash, OOM or kill ends as
a failed run with its reason")."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage import Database
    from storage.jobs import JobInfo
    from storage.runs import NewRun

WORKER_STOPPED = "worker stopped"


def signal_reason(returncode: int) -> str:
    """'killed by signal 9 (SIGKILL)' for a negative return code."""
    num = -returncode
    try:
        name = signal.Signals(num).name
    except ValueError:
        return f"killed by signal {num}"
    return f"killed by signal {num} ({name})"


def failure_outcome(returncode: int, stored_error: str | None, log_tail: str) -> str:
    """A one-line reason for a job process that did not exit 0 on its own."""
    if returncode < 0:
        reason = signal_reason(returncode)
    else:
        lines = [ln.strip() for ln in log_tail.splitlines() if ln.strip()]
        reason = stored_error or (lines[-1] if lines else f"exited with code {returncode}")
    if "CUDA out of memory" in (log_tail + reason) and not reason.startswith("CUDA out of memory"):
        reason = f"CUDA out of memory ({reason})"
    return reason[:2000]


def job_outcome(
    reason: str | None, returncode: int, cancel_asked: bool, current: JobInfo | None, tail: str
) -> tuple[str, str | None]:
    """(final status, reason) of a job whose process ended, from why it was stopped and its exit."""
    from storage import jobs

    if reason == "shutdown" and not cancel_asked:  # could not be given back (its run is stored)
        return (jobs.DONE, None) if returncode == 0 else (jobs.FAILED, WORKER_STOPPED)
    if reason in ("cancelled", "shutdown"):
        return jobs.CANCELLED, "cancelled by user"
    if reason is not None:  # timed out
        return jobs.FAILED, reason
    if returncode == 0:
        return jobs.DONE, None
    return jobs.FAILED, failure_outcome(returncode, current.error if current else None, tail)


def failed_run_of(job: JobInfo, reason: str) -> NewRun:
    """The failed run (a :class:`storage.runs.NewRun`) of a job that ended without storing one."""
    from engine.run.store import new_run
    from engine.spec import SpecError, parse_job_spec
    from storage.runs import NewRun

    prov = {"recorded_by": "worker", "attempt": job.attempts}
    try:
        spec = parse_job_spec(job.spec)
    except SpecError:  # a spec this version no longer accepts: identity from the stored fields
        model = (job.spec.get("model") or {}).get("source") or "?"
        engine = (job.spec.get("recipe") or {}).get("engine") or "?"
        return NewRun(
            status="failed", spec=job.spec, fingerprint=job.fingerprint, model=model, engine=engine,
            device=job.device, name=job.name, sweep=job.sweep, provenance=prov, error=reason, job_id=job.id,
        )  # fmt: skip
    return new_run(spec, "failed", reason, job_id=job.id, sweep=job.sweep, provenance=prov)


def end_job(db: Database, job: JobInfo, worker_id: str, stop_reason: str | None, returncode: int, tail: str) -> str:
    """End a job whose process has ended, once, by why it ended; a line saying what happened.

    Shared by the local worker and the Ray executor: a job another worker (or the recovery)
    ended meanwhile is left as it is; one stopped for a shutdown goes back to the queue unless
    a user cancelled it; else :func:`job_outcome` decides, and a failed job without a run gets
    :func:`failed_run_of` (a spec that cannot run, exit 3, gets none).
    """
    from engine.jobs.job_process import EXIT_SPEC
    from storage import jobs

    current = jobs.get_job(db, job.id)
    cancel_asked = bool(current and current.cancel_requested)
    if current is not None and (current.status != jobs.RUNNING or current.worker_id != worker_id):
        return f"job {job.id} was ended without this worker ({current.status}: {current.error or 'ok'}); ignored"
    if stop_reason == "shutdown" and not cancel_asked and jobs.requeue(db, job.id, worker_id):
        return f"job {job.id} given back to the queue (worker shutting down)"
    status, why = job_outcome(stop_reason, returncode, cancel_asked, current, tail)
    run = failed_run_of(job, why) if status == jobs.FAILED and returncode != EXIT_SPEC else None
    ended = jobs.finish(db, job.id, worker_id, status, error=why, log_tail=tail, failed_run=run)
    if ended is None:
        return f"job {job.id} was ended by another worker meanwhile; this outcome ({status}) dropped"
    if status == jobs.DONE:
        return f"job {job.id} done (run {ended.run_id})"
    return f"job {job.id} {status}: {why} (run {ended.run_id})"
