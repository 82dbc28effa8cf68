"""Sweep points run in their own spawned process; a process that breaks or dies is a failed point."""

from __future__ import annotations

import os
import signal

import pytest

from engine.jobs.sweep import run_point


def _die(conn, db_url, sweep) -> None:  # a point killed from outside (OOM killer, kill -9)
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


def _keeps(conn, db_url, sweep) -> None:  # a point process whose model stays loaded until a point fails
    from engine.jobs.sweep import PointOutcome

    while (spec := conn.recv()) is not None:
        failed = spec == "fail"
        conn.send(PointOutcome(run_id=None, error="broke" if failed else None, pid=os.getpid(), keeps_load=not failed))
        if failed:
            return


def test_a_process_that_keeps_its_model_takes_the_next_point_and_a_failure_ends_it(db_url) -> None:
    from engine.jobs.sweep import PointProcess

    lines: list[str] = []
    with PointProcess(db_url, "s", log=lines.append, target=_keeps) as points:
        first, second, failed, after = (points.run(s) for s in ("a", "b", "fail", "c"))
    assert first.pid == second.pid == failed.pid != after.pid  # one load for a, b and the failed point
    assert not failed.ok and after.ok
    assert [line.split(" in process ")[0] for line in lines] == ["[s] running", "[s] running"]


@pytest.mark.slow
def test_a_transformers_sweep_loads_the_model_once(db_url) -> None:
    """Two points of the demo on transformers: one process, one load; each run says which run on the load it was."""
    import json
    import subprocess
    import sys

    from engine.report.results import render_table, result_object
    from storage import open_database
    from storage.runs import get_run

    args = ["--model", "demo", "--prompt-tokens", "8", "--output-tokens", "4", "--requests", "2", "--warmup", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "sweep", "--db", db_url, "--json", *args, "--rates", "2,4"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    points = json.loads(proc.stdout)["points"]
    assert proc.stderr.count("running in process") == 1 and proc.stderr.count("loaded demo") == 1
    assert "reusing demo" in proc.stderr
    db = open_database(db_url)
    runs = [get_run(db, p["run_id"]) for p in points]
    assert [r.provenance["load_shared"]["run_on_load"] for r in runs] == [1, 2]
    assert "this is run 2 on that load, which did not load again" in render_table(result_object(runs[1]))
