"""Sweep points of ``python -m engine sweep``, each run in its own job process.

One job, one process (DESIGN, "Isolation"): a point's model, its memory peak and whatever
it left behind (a crashed engine, a leaked thread) never reach the next point. Every point
is spawned (never forked) with :mod:`multiprocessing`, runs
:func:`engine.run.runner.run_benchmark` like a worker's job process, stores its run (a
failure is stored as a failed run) and sends back its run id and metrics. A process that
dies without answering (a signal, an OOM kill) ends the point as failed with the reason,
and the sweep goes on.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from engine.jobs.worker import signal_reason
from engine.jsonvalue import JSONObject
from engine.measure.saturation import RECORD


@dataclass
class PointOutcome:
    """What one point's process reported: its stored run, and its metrics or why it failed, and its
    run's saturation verdict (:mod:`engine.measure.saturation`, the stored form; None: not judged)."""

    run_id: int | None
    metrics: JSONObject = field(default_factory=dict)
    error: str | None = None
    pid: int | None = None
    saturation: JSONObject | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_point(
    spec_json: str,
    db_url: str,
    sweep: str,
    log: Callable[[str], None] | None = None,
    target: Callable[..., None] | None = None,
) -> PointOutcome:
    """Run one sweep point in a fresh spawned process and wait for it (``target``: the process's
    function, :func:`point_main` unless a test gives another)."""
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target or point_main, args=(spec_json, db_url, sweep, sender), name=f"sweep-{sweep}")
    proc.start()
    sender.close()  # the child holds the only sending end: recv() ends when it answers or dies
    if log is not None:
        log(f"[{sweep}] running in process {proc.pid}")
    try:
        outcome: PointOutcome | None = receiver.recv()
    except EOFError:
        outcome = None
    finally:
        receiver.close()
        proc.join()
    if outcome is None:
        code = proc.exitcode if proc.exitcode is not None else 1
        why = signal_reason(code) if code < 0 else f"exited with code {code}"
        return PointOutcome(run_id=None, error=f"the point's process {why} before it reported", pid=proc.pid)
    return outcome


def point_main(spec_json: str, db_url: str, sweep: str, sender: Connection) -> None:
    """In the point's process: run, store and report (never raises; the exit code says ok or not)."""
    from engine.run import runner
    from engine.spec import parse_job_spec
    from storage import open_database

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        from engine.jobs.ray_load import load_launcher

        spec = parse_job_spec(spec_json)
        result = runner.run_benchmark(
            spec, db=open_database(db_url), log=log, sweep=sweep, launcher=load_launcher(spec)
        )
        outcome = PointOutcome(
            run_id=result.run_id, metrics=result.metrics, pid=os.getpid(), saturation=result.series.get(RECORD)
        )
    except runner.BenchmarkFailed as exc:
        outcome = PointOutcome(run_id=exc.run_id, error=exc.reason, pid=os.getpid())
    except Exception as exc:  # noqa: BLE001 - a point that breaks is a failed point, with its reason
        outcome = PointOutcome(run_id=None, error=f"{type(exc).__name__}: {exc}", pid=os.getpid())
    sender.send(outcome)
    sender.close()
    sys.stdout.flush()
    sys.stderr.flush()
    if not outcome.ok:
        sys.exit(1)
