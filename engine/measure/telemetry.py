"""Device telemetry beside the measured phase: CPU (psutil) and GPU (NVML) sampled every <= 100 ms.

The runner starts a :class:`TelemetrySampler` next to :class:`engine.measure.memory.TreeSampler`
and :class:`engine.measure.provenance.NoiseSampler`; a daemon thread reads one sample every
``LATENCYLAB_TELEMETRY_INTERVAL_MS`` (100 by default, at most 100) and :meth:`TelemetrySampler.series`
returns the compact series stored as the run's ``"telemetry"`` record::

    {"interval_ms": 100, "t0_ns": <perf_counter_ns at t_s = 0>, "t_s": [0.0, 0.1, ...],
     "fields": {"cpu_util_mean_pct": [...], ...}, "units": {field: unit},
     "source": "psutil" | "nvml+psutil", "unavailable": {field: reason}, "cpu_cores": 2, ...}

CPU fields: ``cpu_util_mean_pct``/``cpu_util_max_pct`` (per-core utilisation summarised per
sample: the mean and the busiest core; ``cpu_cores`` says how many), ``rss_bytes`` (the job's
process tree, the list of processes refreshed every second), ``cpu_freq_mhz``, ``cpu_temp_c``
(the hottest sensor, read every second), ``load_1m``, ``steal_pct`` (from /proc/stat, between
samples) and ``requests_done`` (requests served so far, for memory against requests).
GPU fields: :mod:`engine.measure.gpu_telemetry`. ``t0_ns`` lines the series up with the
requests' ``perf_counter_ns`` stamps. A series longer than :data:`MAX_SAMPLES` is thinned
(every other sample kept, the interval doubled), so a 24-hour soak stays small.

:func:`sample_devices` gives one instantaneous reading with the same field names (the
worker's Prometheus endpoint calls it). The energy of the phase is measured by an
:class:`engine.measure.energy.EnergyMeter` (NVML or RAPL) owned by the sampler.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

import psutil

from engine.jsonvalue import JSONObject
from engine.measure import memory, provenance
from engine.measure.energy import EnergyMeter, energy_metrics
from engine.measure.gpu_telemetry import GPU_UNITS, Nvml, NvmlReader
from engine.measure.provenance import NoiseSampler, cpu_ticks

MAX_INTERVAL_MS = 100
MAX_SAMPLES = 6000  # 10 minutes at 100 ms; longer phases are thinned
SLOW_EVERY = 10  # samples between reads of the slow sources (process list, temperature sensors)
CPU_UNITS: dict[str, str] = {
    "cpu_util_mean_pct": "%",
    "cpu_util_max_pct": "%",
    "rss_bytes": "bytes",
    "cpu_freq_mhz": "MHz",
    "cpu_temp_c": "°C",
    "load_1m": "",
    "steal_pct": "%",
    "requests_done": "requests",
}
_DIGITS = {"%": 1, "°C": 1, "W": 1, "J": 2, "": 2, "MHz": 0, "bytes": 0, "bitmask": 0, "processes": 0, "requests": 0}


def interval_ms() -> int:
    """The sampling interval from the settings, clamped to 10..100 ms."""
    from engine.settings import get_settings

    return max(10, min(MAX_INTERVAL_MS, int(get_settings().telemetry_interval_ms)))


def gpu_indices_of(device: str) -> list[int]:
    """NVML indices of a ``cuda:0,1`` device ([] for the CPU)."""
    if not device.startswith("cuda:"):
        return []
    return [int(i) for i in device.split(":", 1)[1].split(",")]


def _max_temperature() -> float | None:
    try:
        sensors = psutil.sensors_temperatures()
    except (AttributeError, OSError):
        return None
    values = [t.current for entries in sensors.values() for t in entries if t.current is not None]
    return max(values) if values else None


class CpuReader:
    """The CPU fields of one sample; remembers what it needs for deltas (steal, per-core use)."""

    def __init__(self, pid: int | None = None) -> None:
        self._pid = pid or os.getpid()
        self._procs = memory.tree_processes(self._pid)
        self._ticks = cpu_ticks()
        self._n = 0
        self._temp: float | None = None
        self.unavailable: dict[str, str] = {}
        psutil.cpu_percent(percpu=True)  # primes the per-core counters: the next call is since now
        self.cores = psutil.cpu_count() or os.cpu_count() or 1

    def own_pids(self) -> set[int]:
        """The job's process tree as last listed."""
        return {p.pid for p in self._procs}

    def _steal(self) -> float | None:
        now = cpu_ticks()
        before, self._ticks = self._ticks, now
        if now is None or before is None:
            self.unavailable["steal_pct"] = "/proc/stat has no steal column here"
            return None
        total = now[1] - before[1]
        return 100.0 * (now[0] - before[0]) / total if total > 0 else 0.0

    def read(self) -> dict[str, float | None]:
        slow = self._n % SLOW_EVERY == 0
        self._n += 1
        if slow:
            self._procs = memory.tree_processes(self._pid) or self._procs
            self._temp = _max_temperature()
            if self._temp is None:
                self.unavailable["cpu_temp_c"] = "no temperature sensors exposed (psutil.sensors_temperatures is empty)"
        cores = psutil.cpu_percent(percpu=True)
        freq = psutil.cpu_freq()
        if not freq or not freq.current:
            self.unavailable["cpu_freq_mhz"] = "no CPU frequency exposed (psutil.cpu_freq)"
        return {
            "cpu_util_mean_pct": sum(cores) / len(cores) if cores else None,
            "cpu_util_max_pct": max(cores) if cores else None,
            "rss_bytes": float(memory.rss_bytes(self._procs)),
            "cpu_freq_mhz": freq.current if freq and freq.current else None,
            "cpu_temp_c": self._temp,
            "load_1m": os.getloadavg()[0],
            "steal_pct": self._steal(),
        }


def _rounded(value: float | None, unit: str) -> float | int | None:
    if value is None:
        return None
    digits = _DIGITS.get(unit, 2)
    return int(round(value)) if digits == 0 else round(value, digits)


class TelemetrySampler:
    """Samples CPU (and the job's GPUs on ``cuda:N``) between ``start()`` and ``stop()``; see the module doc."""

    def __init__(
        self,
        device: str = "cpu",
        interval: int | None = None,
        requests_done: Callable[[], int] | None = None,
        pid: int | None = None,
        nvml: Nvml | None = None,
    ) -> None:
        self.device = device
        self.interval_ms = interval or interval_ms()
        if not 0 < self.interval_ms <= MAX_INTERVAL_MS:
            raise ValueError(f"sample at least every {MAX_INTERVAL_MS} ms")
        self._requests_done = requests_done or (lambda: 0)
        self._cpu = CpuReader(pid)
        self._gpu = NvmlReader(gpu_indices_of(device), self._cpu.own_pids, nvml) if device.startswith("cuda") else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._t_s: list[float] = []
        self._rows: list[dict[str, float | None]] = []
        self._interval_s = self.interval_ms / 1000
        self.t0_ns = 0
        self.seconds = 0.0
        self.energy: EnergyMeter | None = None

    def _units(self) -> dict[str, str]:
        return {**CPU_UNITS, **(GPU_UNITS if self._gpu is not None else {})}

    def _sample(self) -> None:
        row = self._cpu.read()
        if self._gpu is not None:
            row.update(self._gpu.read())
        row["requests_done"] = float(self._requests_done())
        with self._lock:
            self._t_s.append((time.perf_counter_ns() - self.t0_ns) / 1e9)
            self._rows.append(row)
            if len(self._rows) > MAX_SAMPLES:  # thin: keep every other sample, sample half as often
                self._t_s, self._rows = self._t_s[::2], self._rows[::2]
                self._interval_s *= 2

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def start(self) -> TelemetrySampler:
        """Open NVML (on CUDA), start the energy counter, take a first sample and keep sampling."""
        why = self._gpu.open() if self._gpu is not None else None
        gpu = self._gpu
        self.energy = EnergyMeter(self.device, gpu.handles if gpu else None, nvml=gpu.nvml if gpu else None)
        if why:
            self.energy.unavailable = f"no GPU energy counter: {why}"
        self.t0_ns = time.perf_counter_ns()
        self.energy.start()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="telemetry-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (one last sample first) and read the energy counter."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()
        self.seconds = (time.perf_counter_ns() - self.t0_ns) / 1e9
        if self.energy is not None:
            self.energy.stop()
        if self._gpu is not None:
            self._gpu.close()

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def unavailable(self) -> dict[str, str]:
        """Fields that could not be read, each with its reason."""
        out = {**self._cpu.unavailable, **(self._gpu.unavailable if self._gpu is not None else {})}
        with self._lock:
            for name in self._units():
                if name not in out and all(r.get(name) is None for r in self._rows):
                    out[name] = "never answered"
        return out

    def series(self) -> JSONObject:
        """The compact series (module doc); fields never answered are left out and listed as unavailable."""
        units, missing = self._units(), self.unavailable()
        with self._lock:
            rows, t_s = list(self._rows), [round(t, 3) for t in self._t_s]
        fields = {
            name: [_rounded(r.get(name), unit) for r in rows] for name, unit in units.items() if name not in missing
        }
        out: JSONObject = {
            "interval_ms": self.interval_ms,
            "t0_ns": self.t0_ns,
            "t_s": t_s,
            "fields": fields,
            "units": {k: v for k, v in units.items() if k in fields},
            "source": "nvml+psutil" if self._gpu is not None and self._gpu.names else "psutil",
            "unavailable": missing,
            "cpu_cores": self._cpu.cores,
            "device": self.device,
        }
        if self._gpu is not None:
            out["gpu_names"] = self._gpu.names
            out["gpu_other_processes"] = list(self._gpu.other_processes.values())
        return out

    def energy_metrics(self, output_tokens: int) -> JSONObject:
        """The phase's energy metrics (``energy_per_output_token_j``, ``avg_power_w``; None with a reason)."""
        meter = self.energy
        if meter is None:
            return energy_metrics(None, 0.0, output_tokens, None, "the telemetry sampler did not run")
        return energy_metrics(meter.joules, self.seconds, output_tokens, meter.source, meter.unavailable)


@contextmanager
def phase_samplers(
    device: str, requests_done: Callable[[], int], rss: bool = True
) -> Iterator[tuple[memory.TreeSampler, NoiseSampler, TelemetrySampler]]:
    """Every sampler of the measured phase, started together: peak RSS every 20 ms (memory; not when
    ``rss`` is False: a remote server's memory is not the job's tree, and the sampler would only take the
    client's CPU), the machine's noise (provenance) and this module's telemetry every <= 100 ms."""
    from engine.measure.devices import cuda_devices

    tree = memory.TreeSampler()
    with (
        tree if rss else nullcontext(tree) as rss_sampler,
        provenance.NoiseSampler(device, cuda_devices) as machine,
        TelemetrySampler(device, requests_done=requests_done) as tele,
    ):
        yield rss_sampler, machine, tele


_READERS: dict[str, tuple[CpuReader, NvmlReader | None]] = {}


def sample_devices(device: str) -> dict[str, float]:
    """One instantaneous reading of ``device`` ("cpu" or "cuda:N"), the series' field names, answered fields only.

    Utilisation and steal are since the previous call for the same device (the first call
    waits 0.1 s to have a span); NVML stays open between calls.
    """
    readers = _READERS.get(device)
    if readers is None:
        cpu = CpuReader()
        gpu = NvmlReader(gpu_indices_of(device), cpu.own_pids) if device.startswith("cuda") else None
        if gpu is not None:
            gpu.open()
        readers = _READERS[device] = (cpu, gpu)
        time.sleep(0.1)
    cpu, gpu = readers
    row = cpu.read()
    if gpu is not None:
        row.update(gpu.read())
    return {k: float(v) for k, v in row.items() if v is not None}
