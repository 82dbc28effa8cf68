"""Jobs as local processes, one slot per device (or GPU group): the local worker's placement.

Each job is spawned (never forked from a server) as ``python -m engine.jobs.job_process`` in a new
session, hence its own process group, with ``CUDA_VISIBLE_DEVICES`` pinned to its GPUs,
``LATENCYLAB_PINNED=1`` and its output in ``<data_dir>/logs/job-<id>.log`` (engine/jobs/launch.py).
A stop is SIGTERM to the group, a forced stop SIGKILL; when the job's process has ended, its group
gets SIGKILL too, so that no grandchild outlives the job. A GPU slot whose GPU another process is
computing on takes no job (checked every 5 s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.jobs.launch import job_command, job_env, killpg, read_tail, spawn_job
from engine.jobs.placing import Ended, WorkerInfo, say
from engine.measure.devices import detect_devices, gpu_indices

if TYPE_CHECKING:
    from storage.jobs import JobInfo

TAIL_EVERY_S = 2.0  # how often a running job's log tail is stored
BUSY_EVERY_S = 5.0  # how often a GPU slot's GPUs are checked for another process's work


@dataclass
class LocalJob:
    """A job's process on a slot of this machine."""

    job_id: int
    device: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    last_tail: float


@dataclass
class Slot:
    """One device (or GPU group) and the job it runs, if any."""

    device: str
    running: LocalJob | None = None
    busy_checked: float = float("-inf")
    busy: bool = False


class LocalPlacement:
    """Jobs as process groups on this machine, one at a time per slot of ``devices``."""

    worker_id_prefix = ""

    def __init__(self, devices: list[str]) -> None:
        self.devices = list(devices)
        self.slots = [Slot(device=d) for d in self.devices]

    def claimable(self) -> list[str]:
        return [s.device for s in self.slots if s.running is None and not self._busy(s)]

    def start(self, job: JobInfo, worker: WorkerInfo) -> LocalJob:
        slot = next(s for s in self.slots if s.running is None and s.device == job.device)
        env = job_env(job.device, {"executor": "local", "host": worker.host, "worker_id": worker.worker_id})
        log_path = worker.log_dir / f"job-{job.id}.log"
        header = f"attempt {job.attempts} on {worker.worker_id}, device {job.device}"
        proc = spawn_job(job_command(job.id, worker.db_url, os.getpid()), env, log_path, header)
        slot.running = LocalJob(job.id, job.device, proc, log_path, time.monotonic())
        say(f"job {job.id} started on {job.device} (pid {proc.pid}, log {log_path})")
        return slot.running

    def stop(self, handle: LocalJob) -> None:
        killpg(handle.proc, signal.SIGTERM)

    def force(self, handle: LocalJob) -> None:
        killpg(handle.proc, signal.SIGKILL)

    def collect(self, timeout_s: float = 0.0) -> list[Ended[LocalJob]]:
        deadline = time.monotonic() + timeout_s
        while True:
            ended = [self._end(s, r) for s in self.slots if (r := s.running) is not None and r.proc.poll() is not None]
            if ended or time.monotonic() >= deadline:
                return ended
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def progress(self, handle: LocalJob) -> str | None:
        now = time.monotonic()
        if now - handle.last_tail < TAIL_EVERY_S:
            return None
        handle.last_tail = now
        return read_tail(handle.log_path)

    @staticmethod
    def _end(slot: Slot, done: LocalJob) -> Ended[LocalJob]:
        """The slot's process has ended: its return code and tail; nothing of its group outlives it."""
        slot.running = None
        tail = read_tail(done.log_path)
        killpg(done.proc, signal.SIGKILL)  # the group may still hold grandchildren
        return Ended(done, int(done.proc.returncode), tail)

    @staticmethod
    def _busy(slot: Slot) -> bool:
        """A GPU slot whose GPU another process is computing on is not claimed for (checked every 5 s)."""
        if slot.device == "cpu":
            return False
        now = time.monotonic()
        if now - slot.busy_checked >= BUSY_EVERY_S:
            slot.busy_checked = now
            wanted = set(gpu_indices(slot.device))
            slot.busy = any(d.busy for d in detect_devices() if d.index in wanted)
        return slot.busy
