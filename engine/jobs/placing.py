"""Where the worker's jobs run: the one interface its loop drives (:class:`Placement`), with two
implementations, local processes (:mod:`engine.jobs.local_placement`) and Ray tasks
(:mod:`engine.jobs.ray_placement`).

The loop (:class:`engine.jobs.worker.Worker`) owns every decision about a job: when it is claimed,
cancelled, timed out, forced after the grace period, given back or ended (through
:func:`engine.jobs.outcomes.end_job`). A placement only starts a job somewhere, stops it softly,
forces it, says which jobs ended (with their return code and log tail), which devices have room,
and judges what only it can see: a job whose place was lost (a Ray node died) is reported as such,
and the loop gives it back once if it had not started measuring, like a lost worker's job.
No process or Ray code here.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from storage.jobs import JobInfo


def say(msg: str) -> None:
    """One line of the worker's log (stderr), stamped."""
    print(f"[worker {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class WorkerInfo:
    """What a placement needs to know of the worker that places a job."""

    db_url: str
    worker_id: str
    host: str
    grace_s: float
    log_dir: Path


class Handle(Protocol):
    """A placement's own record of a job it started; the loop reads only which job it is."""

    job_id: int


H = TypeVar("H", bound=Handle)


@dataclass(frozen=True)
class Ended(Generic[H]):
    """A job whose run ended: its return code and log tail (None: the tail the job last stored).

    ``lost`` is the placement's judgement that the job's place went away under it (``ray node … died``):
    the loop gives such a job back to the queue once if it had not started measuring, else fails it
    with that reason.
    """

    handle: H
    returncode: int
    tail: str | None
    lost: str | None = None


class Placement(Protocol[H]):
    """Where a worker's jobs run. Every call is made by the worker's loop, from one thread."""

    devices: list[str]  # the devices this worker serves (registered with the worker, scraped by the exporter)
    worker_id_prefix: str  # "" for local processes, "ray:" for the Ray executor

    def claimable(self) -> list[str]:
        """The devices a job may be claimed for now (none: no room)."""
        ...

    def start(self, job: JobInfo, worker: WorkerInfo) -> H:
        """Start the claimed ``job`` on its device; its handle."""
        ...

    def stop(self, handle: H) -> None:
        """Ask the job to stop (SIGTERM to its group, a soft cancel); it still ends through :meth:`collect`."""
        ...

    def force(self, handle: H) -> None:
        """The job ignored its stop past the grace period: kill it."""
        ...

    def collect(self, timeout_s: float = 0.0) -> list[Ended[H]]:
        """The jobs that ended (waiting up to ``timeout_s`` for one); each is forgotten by the placement."""
        ...

    def progress(self, handle: H) -> str | None:
        """The job's log tail when it is due to be stored (None: not now, or the job stores its own)."""
        ...
