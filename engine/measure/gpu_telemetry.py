"""NVML readings of the job's GPUs for the telemetry sampler: one dict per sample, summed over the GPUs.

Fields (a job on several GPUs gets one value per field: the sum of memory, power and
energy, the mean utilisation, the hottest temperature, the lowest clocks, every GPU's
throttle reasons OR-ed together, and the other processes on any of them):
``gpu_util_pct``, ``gpu_mem_used_bytes``, ``gpu_temp_c``, ``gpu_sm_clock_mhz``,
``gpu_mem_clock_mhz``, ``gpu_power_w``, ``gpu_energy_j`` (the total-energy counter, from
the first sample), ``gpu_throttle_mask`` (NVML's clocks-event reasons; :func:`throttle_names`
names the bits) and ``gpu_other_procs`` (compute processes not in the job's process tree).

A query the board does not support is asked once: the field is then marked unavailable
with NVML's answer (``Not Supported``) and left out of later samples. ``nvml`` is the
``pynvml`` module (tests pass a recorded stand-in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from engine.jsonvalue import JSONObject

# NVML's clocks-event (formerly "throttle") reason bits, as nvml.h names them.
THROTTLE_NAMES: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# The bits that mean the clocks were pulled down by power or heat (idle, app clocks and sync boost do not).
SLOWDOWN_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
THERMAL_MASK = 0x20 | 0x40

GPU_UNITS: dict[str, str] = {
    "gpu_util_pct": "%",
    "gpu_mem_used_bytes": "bytes",
    "gpu_temp_c": "°C",
    "gpu_sm_clock_mhz": "MHz",
    "gpu_mem_clock_mhz": "MHz",
    "gpu_power_w": "W",
    "gpu_energy_j": "J",
    "gpu_throttle_mask": "bitmask",
    "gpu_other_procs": "processes",
}


NvmlHandle = object  # an NVML device handle (a ctypes pointer): only ever handed back to NVML


class _Utilization(Protocol):
    @property
    def gpu(self) -> int: ...


class _MemoryInfo(Protocol):
    @property
    def used(self) -> int: ...


class _Process(Protocol):
    @property
    def pid(self) -> int: ...

    @property
    def usedGpuMemory(self) -> int | None: ...


class Nvml(Protocol):
    """What the telemetry sampler and the energy meter ask of NVML: the ``pynvml`` module, or a test's stand-in."""

    NVML_TEMPERATURE_GPU: int
    NVML_CLOCK_SM: int
    NVML_CLOCK_MEM: int

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> NvmlHandle: ...
    def nvmlDeviceGetName(self, handle: NvmlHandle) -> bytes | str: ...
    def nvmlDeviceGetUtilizationRates(self, handle: NvmlHandle) -> _Utilization: ...
    def nvmlDeviceGetMemoryInfo(self, handle: NvmlHandle) -> _MemoryInfo: ...
    def nvmlDeviceGetTemperature(self, handle: NvmlHandle, sensor: int) -> int: ...
    def nvmlDeviceGetClockInfo(self, handle: NvmlHandle, clock: int) -> int: ...
    def nvmlDeviceGetPowerUsage(self, handle: NvmlHandle) -> int: ...
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: NvmlHandle) -> int: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: NvmlHandle) -> list[_Process]: ...
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: NvmlHandle) -> int: ...


def throttle_names(mask: int | float | None) -> list[str]:
    """The names of the reason bits set in ``mask`` (unknown bits as ``0x...``)."""
    if not mask:
        return []
    mask = int(mask)
    names = [name for bit, name in THROTTLE_NAMES.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_NAMES)
    return names + ([f"0x{rest:x}"] if rest else [])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _process_name(pid: int) -> str:
    import psutil

    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return "?"


class NvmlReader:
    """Reads the job's GPUs (NVML indices) each sample; :attr:`unavailable` says which fields could not be."""

    def __init__(self, indices: list[int], own_pids: Callable[[], set[int]], nvml: Nvml | None = None) -> None:
        self._indices, self._own_pids, self._nvml = indices, own_pids, nvml
        self.handles: list[NvmlHandle] = []
        self.unavailable: dict[str, str] = {}
        self.other_processes: dict[int, JSONObject] = {}  # pid -> {pid, name, used_bytes}, every one seen
        self._energy0: float | None = None
        self.names: list[str] = []

    def open(self) -> str | None:
        """Initialise NVML and find the GPUs; None when ready, else why not (every GPU field unavailable)."""
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            self._nvml.nvmlInit()
            self.handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in self._indices]
            self.names = [_text(self._nvml.nvmlDeviceGetName(h)) for h in self.handles]
        except Exception as exc:  # noqa: BLE001 - no driver, no such GPU (NVMLError subclasses vary)
            reason = f"NVML not available: {exc}"
            self.unavailable.update(dict.fromkeys(GPU_UNITS, reason))
            self.handles = []
            return reason
        return None

    @property
    def nvml(self) -> Nvml | None:
        """The NVML module in use (None before :meth:`open`)."""
        return self._nvml

    def close(self) -> None:
        if self.handles:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - best effort
                pass
            self.handles = []

    def _each(self, field: str, ask: Callable[[NvmlHandle], float]) -> list[float] | None:
        """``ask(handle)`` for every GPU; None (and the field marked unavailable) when NVML refuses."""
        if field in self.unavailable or not self.handles:
            return None
        try:
            return [float(ask(h)) for h in self.handles]
        except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported and friends: ask no more
            self.unavailable[field] = f"NVML: {exc}"
            return None

    def _others(self) -> list[float] | None:
        nvml, mine = self._nvml, self._own_pids()

        def count(h: NvmlHandle) -> float:
            procs = [p for p in nvml.nvmlDeviceGetComputeRunningProcesses(h) if p.pid not in mine]
            for p in procs:
                self.other_processes.setdefault(
                    int(p.pid), {"pid": int(p.pid), "name": _process_name(p.pid), "used_bytes": p.usedGpuMemory}
                )
            return len(procs)

        return self._each("gpu_other_procs", count)

    def read(self) -> dict[str, float | None]:
        """One sample of every GPU field, combined over the job's GPUs (None: not answered)."""
        nvml = self._nvml
        util = self._each("gpu_util_pct", lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu)
        mem = self._each("gpu_mem_used_bytes", lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used)
        temp = self._each("gpu_temp_c", lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
        sm = self._each("gpu_sm_clock_mhz", lambda h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
        memclk = self._each("gpu_mem_clock_mhz", lambda h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM))
        power = self._each("gpu_power_w", lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0)
        energy = self._each("gpu_energy_j", lambda h: nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0)
        reasons = self._each("gpu_throttle_mask", lambda h: _reasons(nvml, h))
        others = self._others()
        energy_j = None
        if energy is not None:
            total = sum(energy)
            self._energy0 = total if self._energy0 is None else self._energy0
            energy_j = total - self._energy0
        mask = None if reasons is None else float(_or(reasons))
        return {
            "gpu_util_pct": None if util is None else sum(util) / len(util),
            "gpu_mem_used_bytes": None if mem is None else sum(mem),
            "gpu_temp_c": None if temp is None else max(temp),
            "gpu_sm_clock_mhz": None if sm is None else min(sm),
            "gpu_mem_clock_mhz": None if memclk is None else min(memclk),
            "gpu_power_w": None if power is None else sum(power),
            "gpu_energy_j": energy_j,
            "gpu_throttle_mask": mask,
            "gpu_other_procs": None if others is None else sum(others),
        }


def _reasons(nvml: Nvml, handle: NvmlHandle) -> int:
    """The clocks-event reasons (NVML >= 12.2 name; the older "throttle reasons" call otherwise)."""
    ask = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return int(ask(handle))


def _or(values: list[float]) -> int:
    out = 0
    for v in values:
        out |= int(v)
    return out
