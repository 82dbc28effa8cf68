"""What runs ON a Ray node for one job: the same job process the local worker starts.

:func:`run_job` is the body of the Ray task (a streaming generator; engine/jobs/ray_placement.py
submits it with the resources the job needs). It first yields where it runs (the node id and
address, the task id), so the driver knows the node before the job ends, then spawns
``python -m engine.jobs.job_process`` in its own session with ``--parent-pid`` its own pid,
pinned to the GPUs Ray gave the task, its log in a file on the node (``<data_dir>/logs``)
whose tail it writes to the job every 2 s, and finally yields the return code and the tail.

Cancelled (``ray.cancel``): the interrupt stops the wait, the job's group gets SIGTERM and,
after a grace period, SIGKILL. Killed (a forced cancel, or its node dies): the job process sees
its parent change and kills its own group (engine/jobs/job_process.py), as under the local worker.
Imports ray only inside functions: nothing imports this module but the Ray placement.
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from engine.jobs.launch import job_command, job_env, killpg, read_tail, spawn_job
from engine.jsonvalue import JSONObject

if TYPE_CHECKING:
    import subprocess

    from storage import Database

TAIL_EVERY_S = 2.0
POLL_S = 0.2


def node_facts(dashboard_url: str | None = None) -> dict[str, str]:
    """Where this Ray task runs: executor, node id and address, task id, host (and the dashboard)."""
    import ray

    ctx = ray.get_runtime_context()
    facts = {
        "executor": "ray",
        "node_id": ctx.get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "task_id": ctx.get_task_id() or "",
        "host": socket.gethostname(),
        "ray_address": ctx.gcs_address or "",  # where a --load-nodes job finds the cluster (engine/jobs/ray_load.py)
    }
    if dashboard_url:
        facts["ray_dashboard"] = dashboard_url.rstrip("/")
    return facts


def run_job(
    job_id: int, db_url: str, device: str, attempt: int, grace_s: float, extra: dict[str, str]
) -> Iterator[JSONObject]:
    """The Ray task's body: yields ``{"facts": ...}``, then ``{"returncode": ..., "tail": ...}``."""
    import os

    import ray

    from engine.settings import get_settings
    from storage import jobs, open_database

    facts = {**node_facts(extra.pop("ray_dashboard", None)), **extra}
    yield {"facts": facts}
    gpus = [str(g) for g in ray.get_gpu_ids()] if device.startswith("cuda") else []
    log_path = Path(get_settings().data_dir) / "logs" / f"job-{job_id}.log"
    header = f"attempt {attempt} on ray node {facts['node_id']} ({facts['node_ip']}), task {facts['task_id']}"
    db = open_database(db_url)
    proc = spawn_job(job_command(job_id, db_url, os.getpid()), job_env(device, facts, gpus), log_path, header)
    try:
        last = 0.0
        while proc.poll() is None:
            time.sleep(POLL_S)
            if time.monotonic() - last >= TAIL_EVERY_S:
                last = time.monotonic()
                _set_tail(db, jobs, job_id, read_tail(log_path))
    finally:
        _stop_group(proc, grace_s)
    tail = read_tail(log_path)
    _set_tail(db, jobs, job_id, tail)
    yield {"returncode": proc.returncode, "tail": tail, "log": str(log_path)}


def _set_tail(db: Database, jobs: ModuleType, job_id: int, tail: str) -> None:
    try:
        jobs.set_log_tail(db, job_id, tail)
    except Exception:  # noqa: BLE001 - a missed tail is not fatal; the next one catches up
        pass


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Nothing of the job outlives the task: SIGTERM to a running group, SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        killpg(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    killpg(proc, signal.SIGKILL)
    proc.wait()
