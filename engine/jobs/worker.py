"""The worker: one loop that claims queued jobs, runs each where its placement puts it (local
processes, :mod:`engine.jobs.local_placement`, or Ray tasks, :mod:`engine.jobs.ray_placement`),
and supervises it until it ends, once.

Every round the worker heartbeats, recovers lost workers' jobs, queues due suites, stops the jobs a
user cancelled or whose timeout passed (a soft stop, then a forced one after the grace period),
collects the jobs that ended and ends each through :func:`engine.jobs.outcomes.end_job` (a crash,
a signal, an OOM or a timeout ends the job as failed with a one-line reason and a failed run
carrying it when the job's process stored none), runs its ticks, and claims while its placement
has room. A job whose place was lost (a Ray node died) goes back to the queue once if it had not
started measuring, else fails with the placement's reason.

Running jobs of a worker whose heartbeat went stale (any host) or whose process is gone (same host)
are recovered: re-queued once if they had not started measuring, else failed with "worker lost"
(and a failed run saying so); a job whose process had already stored its run ends as that run did.
A result the job's process sends after its job was recovered is refused by storage (no orphan run),
and the worker that comes back logs that the job was ended without it. On SIGTERM/SIGINT the worker
stops its jobs, forces those still running after the grace period, gives them back to the queue (a
cancel requested by a user ends as cancelled), marks itself stopped and exits 0.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, cast, overload

from engine.jobs.launch import LOG_TAIL_BYTES, read_tail
from engine.jobs.local_placement import LocalPlacement
from engine.jobs.outcomes import WORKER_STOPPED, end_job, failed_run_of, failure_outcome, signal_reason
from engine.jobs.placing import Ended, H, Placement, WorkerInfo, say
from engine.settings import get_settings
from storage import StorageError

if TYPE_CHECKING:
    from engine.jobs.local_placement import LocalJob
    from storage import Database
    from storage.jobs import JobInfo

__all__ = [
    "LOG_TAIL_BYTES",
    "WORKER_STOPPED",
    "Running",
    "Worker",
    "failed_run_of",
    "failure_outcome",
    "read_tail",
    "signal_reason",
]

SCHEDULES_S = 20.0  # how often a worker looks for due suite schedules
TICK_S = 2.0  # how often a worker runs its ticks (``python -m engine worker``: advancing studies and SLA searches)
SHUTDOWN_WAIT_S = 10.0  # past the grace period, how long a shutdown waits for forced jobs to end


@dataclass
class Running(Generic[H]):
    """A job this worker runs: its placement's handle, and the loop's own state of it."""

    job: JobInfo
    handle: H
    deadline: float
    stop_reason: str | None = None  # why we are stopping it: "cancelled", "timed out ...", "shutdown"
    stop_sent: float | None = None
    forced: bool = False


class Worker(Generic[H]):
    """Serves jobs from the database at ``db_url`` until stopped: on local slots for ``devices``, or where
    ``placement`` puts them (a :class:`~engine.jobs.ray_placement.RayPlacement`); ``H`` is the placement's handle."""

    @overload
    def __init__(
        self: Worker[LocalJob],
        db_url: str,
        devices: list[str] | None = None,
        *,
        placement: None = None,
        worker_id: str | None = None,
        poll_s: float = 0.25,
        heartbeat_s: float = 2.0,
        stale_after_s: float = 20.0,
        grace_s: float = 5.0,
        log_dir: Path | None = None,
        once: bool = False,
        ticks: Sequence[Callable[[Database], list[str]]] = (),
    ) -> None: ...

    @overload
    def __init__(
        self,
        db_url: str,
        devices: None = None,
        *,
        placement: Placement[H],
        worker_id: str | None = None,
        poll_s: float = 0.25,
        heartbeat_s: float = 2.0,
        stale_after_s: float = 20.0,
        grace_s: float = 5.0,
        log_dir: Path | None = None,
        once: bool = False,
        ticks: Sequence[Callable[[Database], list[str]]] = (),
    ) -> None: ...

    def __init__(
        self,
        db_url: str,
        devices: list[str] | None = None,
        *,
        placement: Placement[H] | None = None,
        worker_id: str | None = None,
        poll_s: float = 0.25,
        heartbeat_s: float = 2.0,
        stale_after_s: float = 20.0,
        grace_s: float = 5.0,
        log_dir: Path | None = None,
        once: bool = False,
        ticks: Sequence[Callable[[Database], list[str]]] = (),
    ) -> None:
        from storage import open_database

        if placement is not None and devices is not None:
            raise TypeError("Worker: give devices (local slots) or a placement, not both")
        # without a placement, H is LocalJob (the first overload): the local slots' handles
        self.placement: Placement[H] = placement or cast("Placement[H]", LocalPlacement(devices or []))
        self.db_url = db_url
        self.db = open_database(db_url)
        self.host = socket.gethostname()
        self.id = self.placement.worker_id_prefix + (worker_id or f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:6]}")
        self.poll_s, self.heartbeat_s = poll_s, heartbeat_s
        self.stale_after_s, self.grace_s = stale_after_s, grace_s
        self.log_dir = log_dir or get_settings().data_dir / "logs"
        self.info = WorkerInfo(db_url, self.id, self.host, grace_s, self.log_dir)
        self.once = once
        self.running: dict[int, Running[H]] = {}  # by job id
        # A plain flag: a signal handler must not take locks (Event.set can deadlock there).
        self._stopping = False
        self._last_beat = 0.0
        self._last_recover = 0.0
        self._last_schedules = float("-inf")  # suite schedules: checked at once, then every SCHEDULES_S
        # Run every TICK_S with the database; lines to log (engine.cli passes engine.optimize's drivers:
        # recipe studies and SLA searches).
        self.ticks, self._last_tick = list(ticks), float("-inf")

    @property
    def devices(self) -> list[str]:
        """The devices this worker serves."""
        return self.placement.devices

    @property
    def stopping(self) -> bool:
        """True once a stop was asked (the exporter's ``latencylab_worker_up`` turns 0)."""
        return self._stopping

    # -- life cycle ---------------------------------------------------------------------
    def request_stop(self, *_args: object) -> None:
        """Stop claiming; running jobs are stopped and re-queued (signal-handler safe)."""
        self._stopping = True

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT (or, with ``once``, until the queue is empty)."""
        from storage import jobs

        previous = {}  # restored on return: a worker run inside another program leaves its handlers as they were
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        jobs.register_worker(self.db, self.id, self.host, os.getpid(), self.devices)
        say(f"{self.id} serving {', '.join(self.devices)} from {self.db_url}")
        self.recover()
        try:
            while not self._stopping:
                try:
                    idle = self.step()
                except StorageError as exc:  # the database is away for a moment (storage wraps every error)
                    say(f"database error, retrying: {str(exc).splitlines()[0]}")
                    idle = False
                    time.sleep(2.0)
                if self.once and idle:
                    break
                time.sleep(self.poll_s)
        finally:
            self.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def step(self) -> bool:
        """One round: housekeeping, collect ended jobs, stop what must stop, ticks, claim. True when idle."""
        now = time.monotonic()
        cancel_ids = self._housekeeping(now, list(self.running))
        a_job_ended = self._collect() > 0
        for run in list(self.running.values()):
            self._watch(run, now, run.job.id in cancel_ids)
        self._tick(now, a_job_ended)
        claimed = self._claim()
        return not claimed and not self.running

    def _housekeeping(self, now: float, job_ids: list[int]) -> set[int]:
        """Heartbeat, recovery of lost workers' jobs and due suites; the running jobs a user asked to cancel."""
        from storage import jobs

        if now - self._last_beat >= self.heartbeat_s:
            jobs.heartbeat(self.db, self.id, job_ids)
            self._last_beat = now
        if now - self._last_recover >= max(1.0, self.stale_after_s / 2):
            self.recover()
        if now - self._last_schedules >= SCHEDULES_S:
            self._queue_due_suites()
        return set(jobs.cancel_requested(self.db, job_ids)) if job_ids else set()

    def _tick(self, now: float, a_job_ended: bool) -> None:
        """Run the ticks every TICK_S, or at once when a job ended (before claiming: a study's next
        trial is queued, then claimed in the same round)."""
        if self.ticks and (now - self._last_tick >= TICK_S or a_job_ended):
            self._last_tick = now
            for line in [line for tick in self.ticks for line in tick(self.db)]:
                say(line)

    def recover(self) -> None:
        """Recover jobs of lost workers: same-host ones whose process is gone, and stale ones."""
        from storage import jobs

        self._last_recover = time.monotonic()
        dead = []
        for w in jobs.list_workers(self.db):
            if w.id != self.id and not w.stopped and w.host == self.host and not _pid_alive(w.pid):
                dead.append(w.id)
        for r in jobs.recover_stale(
            self.db,
            stale_after_s=self.stale_after_s,
            dead_worker_ids=dead,
            exclude_worker=self.id,
            failed_run=failed_run_of,
        ):
            say(f"job {r.job_id} of lost worker {r.worker_id}: {r.action}")

    def _queue_due_suites(self) -> None:
        """Queue the suites whose cron schedule is due (engine/jobs/suites.py claims each due time once)."""
        from engine.jobs.suites import queue_due

        self._last_schedules = time.monotonic()
        for line in queue_due(self.db):
            say(line)

    def shutdown(self) -> None:
        """Stop running jobs, force those still running after the grace period, give them back, sign off."""
        from storage import jobs

        for run in self.running.values():
            if run.stop_reason is None:
                self._stop(run, "shutdown")
        deadline = time.monotonic() + self.grace_s + SHUTDOWN_WAIT_S
        while self.running and time.monotonic() < deadline:
            for run in self.running.values():
                if not run.forced and time.monotonic() - (run.stop_sent or 0.0) > self.grace_s:
                    self._force(run)
            self._collect(timeout_s=0.2)
        for run in list(self.running.values()):  # jobs that did not end in time: ended without their return code
            del self.running[run.job.id]
            say(end_job(self.db, run.job, self.id, run.stop_reason, -9, self._stored_tail(run)))
        jobs.stop_worker(self.db, self.id)
        say(f"{self.id} stopped")

    # -- one job ------------------------------------------------------------------------
    def _claim(self) -> bool:
        """Claim jobs while the placement has room; True when one was claimed."""
        from storage import jobs

        claimed = False
        while not self._stopping and (devices := self.placement.claimable()):
            job = jobs.claim(self.db, self.id, devices)
            if job is None:
                break
            claimed = True
            self._start(job)
        return claimed

    def _start(self, job: JobInfo) -> None:
        from engine.secrets import register_spec
        from storage import jobs

        register_spec(job.spec)  # the log tail and reasons this worker stores are scrubbed of its key
        handle = self.placement.start(job, self.info)
        self.running[job.id] = Running(job=job, handle=handle, deadline=time.monotonic() + job.timeout_s)
        jobs.mark_started(self.db, job.id, self.id)

    def _watch(self, run: Running[H], now: float, cancel_asked: bool) -> None:
        """Stop a job cancelled or past its timeout; force one that ignored its stop; store its log tail."""
        from storage import jobs

        if run.stop_reason is None and cancel_asked:
            self._stop(run, "cancelled")
        elif run.stop_reason is None and now > run.deadline:
            self._stop(run, f"timed out after {run.job.timeout_s:g} s")
        elif run.stop_sent is not None and not run.forced and now - run.stop_sent > self.grace_s:
            self._force(run)
        tail = self.placement.progress(run.handle)
        if tail is not None:
            jobs.set_log_tail(self.db, run.job.id, tail)

    def _stop(self, run: Running[H], reason: str) -> None:
        run.stop_reason, run.stop_sent = reason, time.monotonic()
        self.placement.stop(run.handle)

    def _force(self, run: Running[H]) -> None:
        run.forced = True
        self.placement.force(run.handle)

    def _collect(self, timeout_s: float = 0.0) -> int:
        """End the jobs the placement says ended; how many."""
        ended = self.placement.collect(timeout_s)
        for end in ended:
            self._end(self.running.pop(end.handle.job_id), end)
        return len(ended)

    def _end(self, run: Running[H], end: Ended[H]) -> None:
        """End a job once, by why it ended (a lost place: back in the queue once before measuring)."""
        if end.lost is not None:
            if self._give_back_lost(run, end.lost):
                return
            run.stop_reason = end.lost  # a failure with this reason (job_outcome), and its failed run
        tail = end.tail if end.tail is not None else self._stored_tail(run)
        say(end_job(self.db, run.job, self.id, run.stop_reason, end.returncode, tail))

    def _give_back_lost(self, run: Running[H], reason: str) -> bool:
        """The rule of a lost worker's job: back in the queue once if it had not started measuring."""
        from storage import jobs

        current = jobs.get_job(self.db, run.job.id)
        if current is None or current.measuring_started or (current.attempts or 0) > 1:
            return False
        if not jobs.requeue(self.db, run.job.id, self.id, count_attempt=True):
            return False
        say(f"job {run.job.id}: {reason} before measuring; back in the queue (one retry)")
        return True

    def _stored_tail(self, run: Running[H]) -> str:
        """The log tail the job last stored (a Ray task's log file is on its node)."""
        from storage import jobs

        current = jobs.get_job(self.db, run.job.id)
        return (current.log_tail or "") if current is not None else ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
