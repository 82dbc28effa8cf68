"""The worker: claims queued jobs, one slot per device (or device group), and supervises
each job in its own process.

Each job is spawned (never forked from a server) as ``python -m engine.jobs.job_process``
in a new session, hence its own process group, with ``CUDA_VISIBLE_DEVICES`` pinned to
its GPUs, ``LATENCYLAB_PINNED=1``, a timeout, and stdout/stderr written to
``<data_dir>/logs/job-<id>.log`` whose tail is kept on the job. Cancel and timeout send
SIGTERM to the group and SIGKILL after a grace period. A crash, a signal, an OOM or a
timeout ends the job as failed with a one-line reason and a failed run carrying it (linked
to the job, shown in Runs and history) when the job's process stored none; the worker
takes the next job.

The worker heartbeats every few seconds. Running jobs of a worker whose heartbeat went
stale (any host) or whose process is gone (same host) are recovered: re-queued once if
they had not started measuring, else failed with "worker lost" (and a failed run saying
so); a job whose process had already stored its run ends as that run did. A result the
job's process sends after its job was recovered is refused by storage (no orphan run),
and the worker that comes back logs that the job was ended without it. On SIGTERM/SIGINT the
worker stops its jobs and gives them back to the queue (a cancel requested by a user
ends as cancelled), marks itself stopped and exits 0.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.jobs.launch import LOG_TAIL_BYTES, job_command, job_env, killpg, read_tail, spawn_job
from engine.jobs.outcomes import WORKER_STOPPED, end_job, failed_run_of, failure_outcome, signal_reason
from engine.measure.devices import detect_devices, gpu_indices
from engine.settings import get_settings
from storage import StorageError

__all__ = [
    "LOG_TAIL_BYTES",
    "WORKER_STOPPED",
    "Slot",
    "Worker",
    "failed_run_of",
    "failure_outcome",
    "read_tail",
    "signal_reason",
]

SCHEDULES_S = 20.0  # how often a worker looks for due suite schedules
TICK_S = 2.0  # how often a worker runs its ticks (``python -m engine worker``: advancing studies and SLA searches)


def _say(msg: str) -> None:
    print(f"[worker {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Slot:
    """One device (or GPU group) and the job it runs, if any."""

    device: str
    job: Any = None
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    started: float = 0.0
    deadline: float = 0.0
    stop_reason: str | None = None  # why we are stopping it: "cancelled", "timed out ...", "shutdown"
    term_sent: float | None = None
    last_tail: float = 0.0
    busy_checked: float = 0.0
    busy: bool = False
    finished: list[int] = field(default_factory=list)


class Worker:
    """Serves jobs for ``devices`` from the database at ``db_url`` until stopped."""

    def __init__(
        self,
        db_url: str,
        devices: list[str],
        *,
        worker_id: str | None = None,
        poll_s: float = 0.25,
        heartbeat_s: float = 2.0,
        stale_after_s: float = 20.0,
        grace_s: float = 5.0,
        log_dir: Path | None = None,
        once: bool = False,
        ticks: Sequence[Callable[[Any], list[str]]] = (),
    ) -> None:
        from storage import open_database

        self.db_url = db_url
        self.db = open_database(db_url)
        self.host = socket.gethostname()
        self.id = worker_id or f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.slots = [Slot(device=d) for d in devices]
        self.poll_s, self.heartbeat_s = poll_s, heartbeat_s
        self.stale_after_s, self.grace_s = stale_after_s, grace_s
        self.log_dir = log_dir or get_settings().data_dir / "logs"
        self.once = once
        # A plain flag: a signal handler must not take locks (Event.set can deadlock there).
        self._stopping = False
        self._last_beat = 0.0
        self._last_recover = 0.0
        self._last_schedules = float("-inf")  # suite schedules: checked at once, then every SCHEDULES_S
        # Run every TICK_S with the database; lines to log (engine.cli passes engine.optimize's drivers:
        # recipe studies and SLA searches).
        self.ticks, self._last_tick = list(ticks), float("-inf")

    # -- life cycle ---------------------------------------------------------------------
    def request_stop(self, *_args: Any) -> None:
        """Stop claiming; running jobs are stopped and re-queued (signal-handler safe)."""
        self._stopping = True

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT (or, with ``once``, until the queue is empty)."""
        from storage import jobs

        previous = {}  # restored on return: a worker run inside another program leaves its handlers as they were
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        jobs.register_worker(self.db, self.id, self.host, os.getpid(), [s.device for s in self.slots])
        _say(f"{self.id} serving {', '.join(s.device for s in self.slots)} from {self.db_url}")
        self.recover()
        try:
            while not self._stopping:
                try:
                    idle = self.step()
                except StorageError as exc:  # the database is away for a moment (storage wraps every error)
                    _say(f"database error, retrying: {str(exc).splitlines()[0]}")
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
        """One round: heartbeat, recovery, supervise, claim. True when nothing runs or waits."""
        from storage import jobs

        now = time.monotonic()
        running = [s for s in self.slots if s.proc is not None]
        cancel_ids = self._housekeeping(now, [s.job.id for s in running])
        for slot in running:
            if slot.job.id in cancel_ids and slot.stop_reason is None:
                self._terminate(slot, "cancelled")
        ended = sum(len(s.finished) for s in self.slots)
        for slot in self.slots:
            if slot.proc is not None:
                self._supervise(slot)
        self._tick(now, ended < sum(len(s.finished) for s in self.slots))
        claimed_any = False
        if not self._stopping:
            for slot in self.slots:
                if slot.proc is None and not self._device_busy(slot):
                    job = jobs.claim(self.db, self.id, [slot.device])
                    if job is not None:
                        claimed_any = True
                        self._spawn(slot, job)
        return not claimed_any and all(s.proc is None for s in self.slots)

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
        """Run the ticks every TICK_S, or at once when a job ended (after supervising: a study's next
        trial is queued, then claimed in the same round)."""
        if self.ticks and (now - self._last_tick >= TICK_S or a_job_ended):
            self._last_tick = now
            for line in [line for tick in self.ticks for line in tick(self.db)]:
                _say(line)

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
            _say(f"job {r.job_id} of lost worker {r.worker_id}: {r.action}")

    def _queue_due_suites(self) -> None:
        """Queue the suites whose cron schedule is due (engine/jobs/suites.py claims each due time once)."""
        from engine.jobs.suites import queue_due

        self._last_schedules = time.monotonic()
        for line in queue_due(self.db):
            _say(line)

    def shutdown(self) -> None:
        """Stop running jobs (SIGTERM, then SIGKILL), give them back to the queue, sign off."""
        from storage import jobs

        for slot in self.slots:
            if slot.proc is not None and slot.stop_reason is None:
                self._terminate(slot, "shutdown")
        deadline = time.monotonic() + self.grace_s
        while any(s.proc is not None for s in self.slots):
            for slot in self.slots:
                if slot.proc is not None and slot.proc.poll() is not None:
                    self._finalize(slot, slot.proc.returncode)
                elif slot.proc is not None and time.monotonic() > deadline:
                    killpg(slot.proc, signal.SIGKILL)
            time.sleep(0.05)
        jobs.stop_worker(self.db, self.id)
        _say(f"{self.id} stopped")

    # -- one job ------------------------------------------------------------------------
    def _device_busy(self, slot: Slot) -> bool:
        """A GPU slot whose GPU another process is computing on is not claimed for (checked every 5 s)."""
        if slot.device == "cpu":
            return False
        now = time.monotonic()
        if now - slot.busy_checked >= 5.0:
            slot.busy_checked = now
            wanted = set(gpu_indices(slot.device))
            slot.busy = any(d.busy for d in detect_devices() if d.index in wanted)
        return slot.busy

    def _spawn(self, slot: Slot, job: Any) -> None:
        from engine.secrets import register_spec
        from storage import jobs

        register_spec(job.spec)  # the log tail and reasons this worker stores are scrubbed of its key

        env = job_env(job.device, {"executor": "local", "host": self.host, "worker_id": self.id})
        slot.log_path = self.log_dir / f"job-{job.id}.log"
        header = f"attempt {job.attempts} on {self.id}, device {job.device}"
        slot.proc = spawn_job(job_command(job.id, self.db_url, os.getpid()), env, slot.log_path, header)
        slot.job, slot.started = job, time.monotonic()
        slot.deadline = slot.started + job.timeout_s
        slot.stop_reason, slot.term_sent, slot.last_tail = None, None, slot.started
        jobs.mark_started(self.db, job.id, self.id)
        _say(f"job {job.id} started on {job.device} (pid {slot.proc.pid}, log {slot.log_path})")

    def _terminate(self, slot: Slot, reason: str) -> None:
        slot.stop_reason = reason
        slot.term_sent = time.monotonic()
        killpg(slot.proc, signal.SIGTERM)

    def _supervise(self, slot: Slot) -> None:
        from storage import jobs

        proc = slot.proc
        rc = proc.poll()
        now = time.monotonic()
        if rc is not None:
            self._finalize(slot, rc)
            return
        if slot.stop_reason is None and now > slot.deadline:
            self._terminate(slot, f"timed out after {slot.job.timeout_s:g} s")
        elif slot.term_sent is not None and now - slot.term_sent > self.grace_s:
            killpg(proc, signal.SIGKILL)
        if now - slot.last_tail >= 2.0 and slot.log_path is not None:
            slot.last_tail = now
            jobs.set_log_tail(self.db, slot.job.id, read_tail(slot.log_path))

    def _finalize(self, slot: Slot, returncode: int) -> None:
        """The job's process has ended: end the job once, by why it ended."""

        job = slot.job
        tail = read_tail(slot.log_path) if slot.log_path else ""
        # The process group may still hold grandchildren: make sure nothing outlives the job.
        killpg(slot.proc, signal.SIGKILL)
        _say(end_job(self.db, job, self.id, slot.stop_reason, returncode, tail))
        slot.finished.append(job.id)
        slot.job, slot.proc, slot.stop_reason, slot.term_sent = None, None, None, None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
