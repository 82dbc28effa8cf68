"""The client checks itself: how late it sent, how late its event loop ran, how busy its processes were.

Every process that drives requests (the load driver's, and each client process of
``--client-processes``) samples its event loop with :class:`LoopMonitor` during a phase: a task
that sleeps :data:`SAMPLE_S` and records how much later than asked it woke (a loop busy with other
callbacks wakes it late, and stamps the reads it handles late by as much). Each process also counts
its CPU time over the phase (:class:`ClientSample`). :func:`client_group` turns the samples and the
records' send lag (a request's send stamp minus the moment it could go out: its due time, or when
its concurrency slot or its static batch's turn came; ``RequestRecord.ready_ns``) into the run's
``client`` group of the result JSON, whose figures are declared in the metric registry
(:mod:`engine.measure.declarations`); :mod:`engine.run.noise` flags a run the client held back.

A client also keeps itself from being late: :func:`pause_gc` turns Python's cyclic garbage collector
off for its measured phase (what exists is frozen first): a collection of the older generations walks
every live object and stalls the loop for milliseconds to tens of milliseconds at a time, and every
read it handles meanwhile is stamped that late. Reference counting still frees what a request leaves
behind; the collector runs again after the phase.
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.records import RequestRecord
from engine.measure.schedule import lateness

SAMPLE_S = 0.01  # the loop monitor's period: 100 wake-ups a second, a few microseconds each


def pause_gc() -> bool:
    """The cyclic collector off (existing objects frozen out of later collections); False if it was off."""
    if not gc.isenabled():
        return False
    gc.freeze()
    gc.disable()
    return True


def resume_gc(paused: bool) -> None:
    """The collector back on after :func:`pause_gc` (``paused``: what it returned)."""
    if paused:
        gc.enable()


@dataclass
class ClientSample:
    """One client process over one phase: its loop's lateness samples, CPU and wall time."""

    loop_lag_ns: list[int] = field(default_factory=list)
    cpu_ns: int = 0
    wall_ns: int = 0
    role: str = "driver"  # "driver" (the load driver's process) or "sender" (a client process)
    kernel_stamps: bool = False  # its reads were stamped by the kernel (a late loop stamped none of them late)

    def to_json(self) -> JSONObject:
        return asdict(self)

    @classmethod
    def from_json(cls, data: JSONMapping) -> ClientSample:
        return cls(
            loop_lag_ns=[int(v) for v in data.get("loop_lag_ns") or []],
            cpu_ns=int(data.get("cpu_ns") or 0),
            wall_ns=int(data.get("wall_ns") or 0),
            role=str(data.get("role") or "sender"),
            kernel_stamps=bool(data.get("kernel_stamps")),
        )


def process_cpu_ns() -> int:
    """CPU time (user + system) of this whole process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return int((ru.ru_utime + ru.ru_stime) * 1e9)


class LoopMonitor:
    """Samples the running loop's lateness and this thread's (or process's) CPU until :meth:`stop`."""

    def __init__(self, role: str = "driver", whole_process: bool = False) -> None:
        self._role = role
        self._cpu = process_cpu_ns if whole_process else time.thread_time_ns
        self._lags: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self._cpu0 = self._wall0 = 0

    def start(self) -> LoopMonitor:
        """Begin sampling on the running loop."""
        self._cpu0, self._wall0 = self._cpu(), time.perf_counter_ns()
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    async def _sample(self) -> None:
        period = int(SAMPLE_S * 1e9)
        lags = self._lags
        while True:
            asked = time.perf_counter_ns() + period
            await asyncio.sleep(SAMPLE_S)
            lags.append(max(time.perf_counter_ns() - asked, 0))

    def stop(self) -> ClientSample:
        """The samples so far; sampling ends."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        return ClientSample(
            loop_lag_ns=list(self._lags),
            cpu_ns=self._cpu() - self._cpu0,
            wall_ns=time.perf_counter_ns() - self._wall0,
            role=self._role,
        )


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _ms_stats(values_ns: Sequence[int] | np.ndarray, prefix: str) -> dict[str, float | None]:
    """``{prefix}_ms_p50``, ``_p99`` and ``_max`` of samples in ns, by :func:`engine.measure.schedule.lateness`."""
    stats = lateness(np.asarray(values_ns, dtype=float) / 1e6)
    return {f"{prefix}_ms_{k}": stats[k] for k in ("p50", "p99", "max")}  # type: ignore[misc]


def send_lags_ns(records: Iterable[RequestRecord]) -> list[int]:
    """Each measured, sent request's send stamp minus the moment it could go out (``ready_ns``)."""
    return [max(r.send_ns - r.ready_ns, 0) for r in records if not r.warmup and r.send_ns and r.ready_ns]


def client_group(samples: Sequence[ClientSample], records: Sequence[RequestRecord], processes: int) -> JSONObject:
    """The ``client`` group of a run's metrics: send lag, event-loop lag (every process's samples pooled)
    and CPU share, ``cpu_share`` over the cores the client's processes could use, ``cpu_share_max`` of the
    busiest process (one core each: an event loop runs on one), ``read_stamps`` who stamped the reads
    (``"kernel"``: a late loop stamped none of them late; ``"event loop"``: as late as it ran)."""
    lags = [v for s in samples for v in s.loop_lag_ns]
    cpu = sum(s.cpu_ns for s in samples)
    by_role: dict[str, list[float]] = {}
    for s in samples:
        if s.wall_ns > 0:
            by_role.setdefault(s.role, []).append(s.cpu_ns / s.wall_ns)
    wall = max((s.wall_ns for s in samples if s.role == "driver"), default=0) or max(
        (s.wall_ns for s in samples), default=0
    )
    n_proc = 1 + (processes if processes > 1 else 0)  # the driver, and the client processes it feeds
    machine = usable_cores()
    cores = min(n_proc, machine)
    shares = [v for values in by_role.values() for v in values]
    readers = [s for s in samples if s.role == "sender"] or list(samples)  # the processes that read the streams
    return {
        "processes": processes,
        **_ms_stats(send_lags_ns(records), "send_lag"),
        **_ms_stats(lags, "loop_lag"),
        "loop_lag_samples": len(lags),
        "cpu_share": (cpu / (wall * cores)) if wall > 0 else None,
        "cpu_share_max": max(shares) if shares else None,
        "cores": cores,
        "machine_cores": machine,
        "read_stamps": "kernel" if readers and all(s.kernel_stamps for s in readers) else "event loop",
    }


# -- why the client set the pace -------------------------------------------------------------------
BUSY_CPU_SHARE = 0.9  # of one core: the client's busiest process at this share is its own bottleneck
HOST_BUSY_SHARE = 0.8  # of the host's cores: busy enough to starve a client that asks for little


@dataclass(frozen=True)
class ClientCause:
    """Why a late client was late, as measured: ``kind`` (``client_cpu``, ``server_cores``, ``other_processes``,
    ``unmeasured``), what was measured (``words``) and the advice that fits it."""

    kind: str
    words: str
    advice: str


def _host_use(client: JSONMapping, samples: JSONMapping | None) -> tuple[float, float, float, int] | None:
    """(the client's cores, the rest of the job's cores, other processes' cores, the host's cores), or None
    when the machine was not sampled (``provenance["noise"]``: :class:`engine.measure.provenance.NoiseSampler`)."""
    if not samples or samples.get("job_cpu_pct") is None:
        return None
    cores = int(samples.get("cpu_count") or client.get("machine_cores") or 1)
    mine = float(client.get("cpu_share") or 0.0) * float(client.get("cores") or 1)
    job = float(samples.get("job_cpu_pct") or 0.0) / 100
    others = float(samples.get("others_cpu_pct") or 0.0) / 100
    return mine, max(job - mine, 0.0), others, cores


def _host_busy(use: tuple[float, float, float, int], samples: JSONMapping | None) -> bool:
    mine, server, others, cores = use
    load = (samples or {}).get("load_during_max")
    return (mine + server + others) >= HOST_BUSY_SHARE * cores or (load is not None and load >= cores)


def client_cause(
    client: JSONMapping, samples: JSONMapping | None = None, server_here: bool | None = None
) -> ClientCause:
    """Why a client that set the pace was late, from what the run measured (rules in order):

    1. ``client_cpu``: its busiest process used :data:`BUSY_CPU_SHARE` of its core or more: the client's own
       CPU; advice: more ``--client-processes`` or fewer streams per process (another host when none is left).
    2. ``server_cores``: the host's cores were busy (:data:`HOST_BUSY_SHARE` of them, or a load average at the
       core count) while the client itself asked for little, and the job's own processes besides the client (a
       managed server, an in-process engine) took more of them than other processes: a server on the same
       cores; advice: separate cores (``taskset``), the client on another host, fewer server threads.
    3. ``other_processes``: the same, but other processes took the cores (a server not started by the job counts).
    4. ``unmeasured``: neither the client's CPU nor the host was busy (or the host was not sampled).

    ``server_here``: the engine runs its server on this host (its descriptor is not ``remote``), for the words.
    """
    share = client.get("cpu_share_max")
    n = int(client.get("processes") or 1)
    if share is not None and share >= BUSY_CPU_SHARE:
        spare = n < int(client.get("machine_cores") or 1)
        advice = (
            f"try more --client-processes (now {n}) or fewer streams per process"
            if spare
            else "its host has no core to spare: send from more hosts (--load-nodes) or fewer streams"
        )
        return ClientCause(
            "client_cpu", f"the client's own CPU: its busiest process used {share:.0%} of a core", advice
        )
    use = _host_use(client, samples)
    if use is not None and _host_busy(use, samples):
        _mine, server, others, cores = use
        measured = f"the client's busiest process used {share or 0:.1%} of a core"
        if server >= others:
            who = "the job's server" if server_here else "the job's own processes besides the client"
            return ClientCause(
                "server_cores",
                f"a server on the same cores took them: {who} used {server:.1f} of {cores} cores while {measured}",
                "give the server and the client separate cores (pin them with taskset, e.g. the server on cores "
                "1-N and the client on core 0), run the client on another host, or give the server fewer threads; "
                "more --client-processes would not help",
            )
        return ClientCause(
            "other_processes",
            f"other processes on this host took the cores ({others:.1f} of {cores}) while {measured}",
            "run on a quiet machine, or send from another host",
        )
    return ClientCause(
        "unmeasured",
        "neither the client's CPU nor the host's cores were measured busy",
        "try more --client-processes, or a less busy client machine",
    )
