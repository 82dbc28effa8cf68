"""Before a job is queued: the submission checks, and the devices live workers serve.

The pages, the CLI verbs, the optimizer and the worker all call these; no process or signal
code lives here, so the Streamlit server can import it without the worker's supervision code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.spec import JobSpec
from storage import Database, jobs
from storage.job_records import WorkerInfo

LIVE_WORKER_S = 30.0  # a worker whose heartbeat is older than this serves nothing


def live_workers(db: Database) -> list[WorkerInfo]:
    """Workers (any host) running now: not stopped, heartbeat within :data:`LIVE_WORKER_S`."""
    return jobs.list_workers(db, alive_within_s=LIVE_WORKER_S)


def served_devices(db: Database) -> set[str]:
    """Every device (``cpu``, ``cuda:0``, ``cuda:0,1`` ...) a live worker serves."""
    return {d for w in live_workers(db) for d in w.devices}


if TYPE_CHECKING:
    from engine.run.sources.check import TrafficCheck


def check_submittable(db: Database, spec: JobSpec) -> TrafficCheck:
    """Everything checked before a job is queued (pre-flight, the device); raises SpecError. Returns what the
    job's traffic would send (its input read through), for the caller to say up front.

    The device must exist on this machine or be served by a live worker (any host), and
    a GPU another process is computing on is refused as busy.
    """
    from engine.measure.devices import check_device, detect_devices, gpu_indices
    from engine.run.preflight import preflight

    here = detect_devices()  # NVML once; never torch
    # This machine's facts (packages, compute capability) only matter for its own devices;
    # a GPU served by a worker on another host is checked there when the job starts.
    local_gpus = {d.index for d in here if d.kind == "cuda"}
    local = spec.device == "cpu" or set(gpu_indices(spec.device)) <= local_gpus
    traffic = preflight(spec, runtime=local)
    # A GPU busy with one of our own running jobs is fine: the new job queues behind it.
    ours = set(jobs.busy_devices(db))
    check_device(spec.device, devices=here, served=served_devices(db), ignore_busy=spec.device in ours)
    return traffic
