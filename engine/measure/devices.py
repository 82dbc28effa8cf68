"""The devices of this machine: the CPU and every CUDA GPU (via NVML, never torch).

GPU indices are NVML's, which equal CUDA's when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
(the worker sets that for every job it spawns).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from engine.spec import SpecError
from engine.spec.device import DEVICE_PATTERN, gpu_indices


@dataclass(frozen=True)
class Device:
    """One device a job can be pinned to."""

    id: str  # "cpu" or "cuda:N"
    kind: str  # "cpu" | "cuda"
    index: int | None
    name: str
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    busy: bool
    busy_reason: str | None = None

    @property
    def label(self) -> str:
        mem = f", {self.memory_total_bytes / 2**30:.0f} GiB" if self.memory_total_bytes else ""
        state = f" (busy: {self.busy_reason})" if self.busy else ""
        return f"{self.id}: {self.name}{mem}{state}"


def _cpu_name() -> str:
    from engine.measure.provenance import cpu_model

    return cpu_model() or "CPU"


def cpu_device() -> Device:
    """The host CPU (never marked busy: CPU jobs queue behind each other on one slot)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = avail = None
    cores = os.cpu_count() or 1
    return Device(
        id="cpu",
        kind="cpu",
        index=None,
        name=f"{_cpu_name()} ({cores} cores)",
        memory_total_bytes=total,
        memory_used_bytes=None if total is None else total - (avail or 0),
        busy=False,
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def cuda_devices(ignore_pids: set[int] | None = None) -> list[Device]:
    """Every CUDA GPU NVML sees; [] without a driver. Busy = another process computes on it."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no GPUs (NVMLError subclasses vary)
        return []
    ignore = ignore_pids or set()
    out: list[Device] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(pynvml.nvmlDeviceGetName(handle))
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                procs = [p for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid not in ignore]
            except Exception:  # noqa: BLE001 - not supported on some drivers/MIG
                procs = []
            reason = None
            if procs:
                used = sum((p.usedGpuMemory or 0) for p in procs) / 2**30
                reason = f"{len(procs)} process(es) running, {used:.1f} GiB in use"
            out.append(
                Device(
                    id=f"cuda:{i}",
                    kind="cuda",
                    index=i,
                    name=name,
                    memory_total_bytes=int(mem.total),
                    memory_used_bytes=int(mem.used),
                    busy=bool(procs),
                    busy_reason=reason,
                )
            )
    except Exception:  # noqa: BLE001 - a GPU that fails to answer is left out, not fatal
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - best effort
            pass
    return out


def compute_capability(index: int) -> tuple[int, int] | None:
    """The CUDA compute capability of the GPU at physical ``index`` (NVML), or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return int(major), int(minor)
    except Exception:  # noqa: BLE001 - no such GPU or not supported
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - best effort
            pass


def detect_devices(ignore_pids: set[int] | None = None) -> list[Device]:
    """The CPU first, then every CUDA GPU by index."""
    return [cpu_device(), *cuda_devices(ignore_pids)]


def parse_device_list(text: str) -> list[str]:
    """``"cpu,cuda:0,cuda:1+2"``-style lists: ``+`` joins GPUs into one slot (``cuda:1,2``)."""
    out: list[str] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        if part == "all":
            out.extend(d.id for d in detect_devices())
            continue
        slot = part.replace("+", ",")
        if not DEVICE_PATTERN.match(slot):
            raise SpecError(f"device {part!r} is not 'cpu', 'cuda:N' or a group like 'cuda:0+1'")
        if slot not in out:
            out.append(slot)
    if not out:
        raise SpecError("no devices given; use e.g. --devices cpu,cuda:0")
    return out


def check_device(
    device: str, devices: list[Device] | None = None, served: set[str] | None = None, ignore_busy: bool = False
) -> None:
    """Refuse a device that does not exist here (nor on any live worker) or that is busy.

    ``served`` holds the device slots of live workers (possibly on other hosts): a job
    for a GPU this host lacks is accepted when some worker serves it.
    """
    if device == "cpu":
        return
    devices = detect_devices() if devices is None else devices
    by_index = {d.index: d for d in devices if d.kind == "cuda"}
    for index in gpu_indices(device):
        gpu = by_index.get(index)
        if gpu is None:
            if served and device in served:
                continue  # a worker on another host serves it
            have = ", ".join(d.id for d in devices)
            raise SpecError(f"device cuda:{index} does not exist on this machine (devices: {have})")
        if gpu.busy and not ignore_busy:
            raise SpecError(
                f"device {gpu.id} is busy ({gpu.busy_reason}); pick another device or wait until it is free"
            )
