"""Sweep points run in their own spawned process; a process that breaks or dies is a failed point."""

from __future__ import annotations

import os
import signal

from engine.jobs.sweep import run_point


def _die(spec_json, db_url, sweep, sender) -> None:  # a point killed from outside (OOM killer, kill -9)
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_point_that_cannot_run_reports_why_from_its_own_process(db_url) -> None:
    outcome = run_point('{"model": {"source": "demo"}, "workload": {"requests": 0}}', db_url, "s")
    assert not outcome.ok and outcome.run_id is None
    assert outcome.error.startswith("SpecError: workload.requests")
    assert outcome.pid is not None and outcome.pid != os.getpid()


def test_a_point_whose_process_dies_is_failed_with_the_signal(db_url) -> None:
    lines: list[str] = []
    outcome = run_point("{}", db_url, "s", log=lines.append, target=_die)
    assert not outcome.ok and outcome.run_id is None
    assert outcome.error == "the point's process killed by signal 9 (SIGKILL) before it reported"
    assert lines and lines[0].startswith("[s] running in process ")
