"""What ran where: versions, host, CPU/GPU names, threads, load, git commit."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONObject
from engine.settings import REPO_ROOT
from engine.spec import engines

if TYPE_CHECKING:
    from engine.measure.devices import Device

# every engine's packages (its descriptor names them), and numpy, which every engine runs on
PACKAGES: tuple[str, ...] = (*engines.packages(), "numpy")
ENV_KEYS: tuple[str, ...] = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "CUDA_VISIBLE_DEVICES", "MKL_NUM_THREADS")


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def placement() -> dict[str, str]:
    """Where the job ran: the executor that started its process and its facts (``LATENCYLAB_JOB_*``,
    set by engine/jobs/launch.py: ``executor`` local or ray, the host or Ray node id, address and task id).

    A run started by hand (``python -m engine run``) has ``executor`` ``inline``. Not in the fingerprint.
    """
    prefix = "LATENCYLAB_JOB_"
    facts = {k[len(prefix) :].lower(): v for k, v in os.environ.items() if k.startswith(prefix) and v}
    facts.setdefault("executor", "inline")
    facts.setdefault("host", socket.gethostname())
    return dict(sorted(facts.items()))


def collect() -> JSONObject:
    """Facts about this process and host, gathered before the measurement."""
    return {
        "placement": placement(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        # code a Ray task unpacked from its runtime environment has no .git: the executor's commit
        "git_commit": git_commit() or os.environ.get("LATENCYLAB_JOB_GIT_COMMIT"),
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "load_avg_before": list(os.getloadavg()),
    }


# -- noise during the measured phase -----------------------------------------------------------
def cpu_ticks() -> tuple[int, int] | None:
    """(steal ticks, all ticks) of the aggregate ``cpu`` line of /proc/stat; None where there is none."""
    try:
        with open("/proc/stat", encoding="utf-8") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return values[7], sum(values)


def _tree_pids() -> set[int]:
    import psutil

    try:
        me = psutil.Process()
        return {me.pid, *(p.pid for p in me.children(recursive=True))}
    except psutil.Error:
        return {os.getpid()}


def _cpu_seconds() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) so far of every process we may read: pid -> (name, seconds)."""
    import psutil

    out = {}
    for proc in psutil.process_iter(["name", "cpu_times"]):
        times = proc.info.get("cpu_times")
        if times is not None:
            out[proc.pid] = (proc.info.get("name") or "?", times.user + times.system)
    return out


def _gpu_busy(device: str, ignore: set[int], list_gpus: Callable[[set[int]], list[Device]] | None) -> list[str]:
    """The job's GPUs that other processes compute on, as ``cuda:0: 1 process(es) running, ...``.

    ``list_gpus(ignore_pids)`` is :func:`engine.measure.devices.cuda_devices` (passed in:
    devices already imports this module).
    """
    if not device.startswith("cuda:") or list_gpus is None:
        return []
    wanted = {f"cuda:{i}" for i in device.split(":", 1)[1].split(",")}
    return [f"{d.id}: {d.busy_reason}" for d in list_gpus(ignore) if d.id in wanted and d.busy]


class NoiseSampler:
    """What else the machine did during the measured phase, for :func:`engine.run.noise.noise_flags`.

    At ``start`` and ``stop`` it reads the load average, /proc/stat's steal ticks, every
    process's CPU seconds and (on CUDA, given ``list_gpus``) NVML's processes on the job's GPUs; between them
    a thread reads the load average every ``interval_s``. Processes of the job's own tree
    are left out. ``samples`` is a plain dict (stored as ``provenance["noise"]``).
    """

    def __init__(
        self,
        device: str = "cpu",
        list_gpus: Callable[[set[int]], list[Device]] | None = None,
        interval_s: float = 2.0,
        top: int = 5,
    ) -> None:
        import threading

        self._device, self._list_gpus, self._interval_s, self._top = device, list_gpus, interval_s, top
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loads: list[float] = []
        self._t0 = 0.0
        self._ticks0: tuple[int, int] | None = None
        self._cpu0: dict[int, tuple[str, float]] = {}
        self._gpu0: list[str] = []
        self.samples: JSONObject = {}

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._loads.append(os.getloadavg()[0])

    def start(self) -> NoiseSampler:
        import threading
        import time

        self.samples = {"cpu_count": os.cpu_count(), "load_before": list(os.getloadavg())}
        self._ticks0, self._cpu0 = cpu_ticks(), _cpu_seconds()
        self._gpu0 = _gpu_busy(self._device, _tree_pids(), self._list_gpus)
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="noise-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> JSONObject:
        """Stop sampling; returns :attr:`samples`."""
        import time

        if self._thread is None:
            return self.samples
        self._stop.set()
        self._thread.join()
        self._thread = None
        wall = max(time.monotonic() - self._t0, 1e-9)
        self._loads.append(os.getloadavg()[0])
        mine = _tree_pids()
        cpu1 = _cpu_seconds()
        busy = [
            {"pid": pid, "name": name, "cpu_pct": round(100 * (sec - self._cpu0.get(pid, (name, 0.0))[1]) / wall, 1)}
            for pid, (name, sec) in cpu1.items()
            if pid not in mine
        ]
        busy.sort(key=lambda p: -p["cpu_pct"])
        ticks1 = cpu_ticks()
        steal = None
        if self._ticks0 is not None and ticks1 is not None and ticks1[1] > self._ticks0[1]:
            steal = 100 * (ticks1[0] - self._ticks0[0]) / (ticks1[1] - self._ticks0[1])
        job = sum(sec - self._cpu0.get(pid, ("", 0.0))[1] for pid, (_, sec) in cpu1.items() if pid in mine)
        self.samples.update(
            measured_s=wall,
            load_during_max=max(self._loads),
            load_after=list(os.getloadavg()),
            steal_pct=steal,
            job_cpu_pct=round(100 * job / wall, 1),
            others_cpu_pct=round(sum(p["cpu_pct"] for p in busy if p["cpu_pct"] > 0), 1),
            busy_processes=[p for p in busy[: self._top] if p["cpu_pct"] > 0],
            gpu_busy=sorted(set(self._gpu0) | set(_gpu_busy(self._device, mine, self._list_gpus))),
        )
        return self.samples

    def __enter__(self) -> NoiseSampler:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
