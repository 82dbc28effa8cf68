"""Sweep points of ``python -m engine sweep``, run in a job process of their own.

One job, one process (DESIGN, "Isolation"): a point's process is spawned (never forked) with
:mod:`multiprocessing`, runs :func:`engine.run.runner.run_benchmark` like a worker's job process, stores its
run (a failure is stored as a failed run) and sends back its run id and metrics. A process that dies without
answering (a signal, an OOM kill) ends the point as failed with the reason, and the sweep goes on.

The model loads once per sweep where the engine allows it (capability ``runs_per_load``: transformers and the
managed vLLM server): the points differ only in their load (rate or concurrency), so the point's process keeps
the loaded model (:class:`engine.run.loading.HeldLoad`) and takes the next point, with what the last run left
(a prefix cache) emptied first. A point that fails ends its process, model and all: the next point starts a
new one. Other engines (a remote endpoint, tensor-parallel ranks) get a new process per point.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

from engine.jobs.worker import signal_reason
from engine.jsonvalue import JSONObject
from engine.measure.saturation import RECORD

if TYPE_CHECKING:
    from engine.run.loading import HeldLoad


@dataclass
class PointOutcome:
    """What one point's process reported: its stored run, and its metrics or why it failed, and its
    run's saturation verdict (:mod:`engine.measure.saturation`, the stored form; None: not judged)."""

    run_id: int | None
    metrics: JSONObject = field(default_factory=dict)
    error: str | None = None
    pid: int | None = None
    saturation: JSONObject | None = None
    keeps_load: bool = False  # its process kept the model loaded and takes the next point

    @property
    def ok(self) -> bool:
        return self.error is None


class PointProcess:
    """The sweep's side of its point process: :meth:`run` hands it a point and waits for the outcome, starting a
    process when none is running (the first point, or the one after a process that did not keep its model);
    :meth:`close` lets the process unload and exit. ``target``: the process's function, :func:`points_main`
    unless a test gives another."""

    def __init__(
        self,
        db_url: str,
        sweep: str,
        log: Callable[[str], None] | None = None,
        target: Callable[..., None] | None = None,
    ) -> None:
        self.db_url, self.sweep, self.log, self.target = db_url, sweep, log, target or points_main
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None

    def __enter__(self) -> PointProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def run(self, spec_json: str) -> PointOutcome:
        """Run one point (a job spec's canonical JSON) and wait for it."""
        if self._proc is None or self._conn is None:
            self._start()
        assert self._proc is not None and self._conn is not None
        try:
            self._conn.send(spec_json)
            outcome: PointOutcome | None = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            outcome = None
        if outcome is None:
            proc = self._end()
            code = proc.exitcode if proc.exitcode is not None else 1
            why = signal_reason(code) if code < 0 else f"exited with code {code}"
            return PointOutcome(run_id=None, error=f"the point's process {why} before it reported", pid=proc.pid)
        if not outcome.keeps_load:
            self._end()
        return outcome

    def close(self) -> None:
        """Tell the process no point follows (it unloads its model and exits) and wait for it."""
        if self._conn is not None:
            try:
                self._conn.send(None)
            except OSError:
                pass
        if self._proc is not None:
            self._end()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=self.target, args=(theirs, self.db_url, self.sweep), name=f"sweep-{self.sweep}")
        proc.start()
        theirs.close()  # the child holds the only other end: recv() ends when it answers or dies
        self._proc, self._conn = proc, mine
        if self.log is not None:
            self.log(f"[{self.sweep}] running in process {proc.pid}")

    def _end(self) -> BaseProcess:
        proc, conn = self._proc, self._conn
        self._proc, self._conn = None, None
        if conn is not None:
            conn.close()
        assert proc is not None
        proc.join()
        return proc


def run_point(
    spec_json: str,
    db_url: str,
    sweep: str,
    log: Callable[[str], None] | None = None,
    target: Callable[..., None] | None = None,
) -> PointOutcome:
    """Run one point in a fresh spawned process and wait for it (the process exits after it)."""
    with PointProcess(db_url, sweep, log, target) as points:
        return points.run(spec_json)


def points_main(conn: Connection, db_url: str, sweep: str) -> None:
    """In the point's process: run, store and report each point it is handed until told none follows (None), it
    loses its parent, or a point ends without a model kept loaded; never raises (the exit code says whether the
    last point went well)."""
    from engine.run.loading import HeldLoad

    held = HeldLoad()
    outcome: PointOutcome | None = None
    try:
        while True:
            try:
                spec_json = conn.recv()
            except EOFError:
                break
            if spec_json is None:
                break
            outcome = _one_point(spec_json, db_url, sweep, held)
            outcome.keeps_load = held.loaded is not None
            conn.send(outcome)
            if not outcome.keeps_load:
                break
    finally:
        held.close()
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
    if outcome is not None and not outcome.ok:
        sys.exit(1)


def _one_point(spec_json: str, db_url: str, sweep: str, held: HeldLoad) -> PointOutcome:
    from engine.run import runner
    from engine.spec import parse_job_spec
    from storage import open_database

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        from engine.jobs.ray_load import load_launcher

        spec = parse_job_spec(spec_json)
        result = runner.run_benchmark(
            spec, db=open_database(db_url), log=log, sweep=sweep, launcher=load_launcher(spec), held=held
        )
        return PointOutcome(
            run_id=result.run_id, metrics=result.metrics, pid=os.getpid(), saturation=result.series.get(RECORD)
        )
    except runner.BenchmarkFailed as exc:
        return PointOutcome(run_id=exc.run_id, error=exc.reason, pid=os.getpid())
    except Exception as exc:  # noqa: BLE001 - a point that breaks is a failed point, with its reason
        return PointOutcome(run_id=None, error=f"{type(exc).__name__}: {exc}", pid=os.getpid())
