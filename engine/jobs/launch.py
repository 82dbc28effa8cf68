"""How a job's process is started, wherever it runs: its command line, its environment and
its log, shared by the local worker (:mod:`engine.jobs.worker`) and the Ray task that runs a
job on a cluster node (:mod:`engine.jobs.ray_task`), so that both run a job the same way.

The process is ``python -m engine.jobs.job_process --job ID --db URL --parent-pid PID``, in a
session of its own (so its own process group, killed as one), pinned to its GPUs with
``CUDA_VISIBLE_DEVICES`` and ``LATENCYLAB_PINNED=1``. Where it ran travels in
``LATENCYLAB_JOB_*`` variables that :func:`engine.measure.provenance.placement` records.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from engine.measure.devices import gpu_indices
from engine.settings import REPO_ROOT, input_folders

LOG_TAIL_BYTES = 6000


def job_command(job_id: int, db_url: str, parent_pid: int) -> list[str]:
    """The job process's command line; it kills its own group when ``parent_pid`` is no longer its parent."""
    return [
        sys.executable,
        "-m",
        "engine.jobs.job_process",
        "--job",
        str(job_id),
        "--db",
        db_url,
        "--parent-pid",
        str(parent_pid),
    ]


def job_env(device: str, placement: Mapping[str, str], gpus: Sequence[str] | None = None) -> dict[str, str]:
    """The job process's environment: this one, pinned to the job's GPUs, with where it runs.

    ``gpus`` are the GPU ids to expose (Ray's assignment on a node); by default the device's own
    indices (``cuda:1,2`` -> ``1,2``). ``placement`` maps ``executor``, ``node_id`` ... to the
    ``LATENCYLAB_JOB_<KEY>`` variables provenance records.
    """
    env = dict(os.environ)
    for key in [k for k in env if k.startswith("LATENCYLAB_JOB_")]:
        del env[key]  # where *this* process ran is not where the job runs
    visible = list(gpus) if gpus is not None else [str(i) for i in gpu_indices(device)]
    env["CUDA_VISIBLE_DEVICES"] = ",".join(visible)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["LATENCYLAB_PINNED"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    for key, value in placement.items():
        env[f"LATENCYLAB_JOB_{key.upper()}"] = str(value)
    folders = input_folders()  # a job on another node may lack the secrets file that turns sign-in's limits on
    if folders is not None and not folders.configured:
        env["LATENCYLAB_ALLOWED_ROOTS"] = os.pathsep.join(str(f) for f in folders.folders)
    return env


def spawn_job(command: list[str], env: dict[str, str], log_path: Path, header: str) -> subprocess.Popen[bytes]:
    """Start the job process in its own session, stdout and stderr appended to ``log_path`` after ``header``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"--- {header}, {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        log.flush()
        return subprocess.Popen(
            command,
            cwd=str(REPO_ROOT),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a log file, cut at a line start."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            data = fh.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > limit and "\n" in text:
        text = text.split("\n", 1)[1]
    return text


def killpg(proc: subprocess.Popen[bytes] | None, sig: int) -> None:
    """Send ``sig`` to the job process's group (its pid: it leads its own session); gone is fine."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
