"""Who sends a job's requests (the load driver's sender): the loaded backend itself, or client processes for it.

``workload.client_processes`` (``--client-processes N``) says how many processes send; None chooses
from the machine's cores and the most requests the workload can have in flight
(:func:`choose`: one process per :data:`STREAMS_PER_PROCESS` streams, at most half the cores, so
the server and the driver keep theirs). Only engines whose requests leave the job's process
(capability ``client_processes``: openai, vllm-server) can; the spec refuses it for the others.
The load driver stays the one scheduler either way (:mod:`engine.backends.openai.process_pool`).
``workload.load_nodes`` (``--load-nodes K``, the openai engine) puts them on K Ray nodes instead, at
least one on each: the launcher that places them there is handed down by whoever runs the job (the
job's process or the CLI: ``engine.jobs.ray_load.RayLauncher``); this layer never imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from engine.backends.base import Backend, BackendError, LauncherFactory, Sender
from engine.jsonvalue import JSONObject
from engine.measure.client_lag import usable_cores
from engine.spec import JobSpec, Workload, engines

STREAMS_PER_PROCESS = 256  # streams one client process serves with its stamps well under a millisecond late


def most_in_flight(workload: Workload) -> int:
    """The most requests the workload can have in flight at once."""
    if workload.max_concurrency is not None:
        return workload.max_concurrency
    if workload.arrival == "batch":
        return workload.batch_size
    return workload.requests  # an open loop without a limit: up to every request


def choose(spec: JobSpec, cores: int | None = None) -> int:
    """How many client processes send ``spec``'s requests (1: the backend itself)."""
    if not engines.get(spec.recipe.engine).capabilities.client_processes:
        return 1
    if spec.workload.client_processes is not None:
        return spec.workload.client_processes
    cores = usable_cores() if cores is None else cores
    return max(1, min(cores // 2, math.ceil(most_in_flight(spec.workload) / STREAMS_PER_PROCESS)))


@dataclass
class Sending:
    """What the load driver drives (the backend, or its client processes), and what the processes said."""

    sender: Sender
    processes: int = 1
    info: JSONObject = field(default_factory=dict)


@contextmanager
def sending(
    spec: JobSpec, backend: Backend, log: Callable[[str], None], launcher: LauncherFactory | None = None
) -> Iterator[Sending]:
    """The backend itself, or its client processes for the block (stopped after it); ``launcher`` places them on
    the spec's load nodes (``--load-nodes``), handed down by whoever runs the job."""
    nodes = spec.workload.load_nodes
    n = max(choose(spec), nodes or 0)  # at least one client process on each node
    if nodes and launcher is None:
        raise BackendError(
            f"load_nodes={nodes}: this job was not handed a launcher for Ray nodes; run it with "
            "`python -m engine worker --executor ray`, or `python -m engine run` with LATENCYLAB_RAY_ADDRESS set"
        )
    progress = lambda msg, _f: log(msg)  # noqa: E731
    pool = backend.client_pool(n, progress, launcher(nodes) if nodes and launcher else None) if n > 1 else None
    if pool is None:
        yield Sending(backend)
        return
    out = Sending(pool, n)
    try:
        yield out
    finally:
        out.info = pool.info()
        pool.close()
