"""Pause, resume and stop a study (the page's buttons and the CLI's verbs); no Optuna needed.

Pause: no new trials start; the ones in flight finish and are recorded. Resume: trials start
again. Stop: final; the jobs of trials in flight are cancelled, and the next advance records
those trials as failed ("cancelled").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage import jobs, studies
from storage.studies import PAUSED, PENDING, RUNNING, STOPPED, StudyInfo

if TYPE_CHECKING:
    from storage import Database

ACTIONS: dict[str, str] = {"pause": PAUSED, "resume": RUNNING, "stop": STOPPED}


def change(db: Database, study: StudyInfo, action: str, *, by: str | None = None) -> tuple[StudyInfo, str]:
    """Apply ``pause``, ``resume`` or ``stop``; (the study after it, one line saying what happened)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; use pause, resume or stop")
    after = studies.set_status(db, study.id, ACTIONS[action], note=f"{action} by {by}" if by else None)
    if after is None:
        raise ValueError(f"study {study.name!r} is gone")
    if after.status != ACTIONS[action]:
        return after, f"study {study.name} is {after.status}; it cannot {action}"
    cancelled = 0
    if action == "stop":
        for trial in studies.list_trials(db, study.id):
            if trial.status == PENDING and trial.job_id is not None:
                if jobs.cancel(db, trial.job_id, by=by) is not None:
                    cancelled += 1
    extra = f"; {cancelled} job(s) in flight cancelled" if cancelled else ""
    return after, f"study {study.name} {after.status}{extra}"
