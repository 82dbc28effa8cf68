"""Energy of the measured phase: NVML's total-energy counter on GPUs, RAPL on CPUs, else a reason.

:class:`EnergyMeter` reads a cumulative counter as the measured phase starts and as it ends;
the difference is the phase's energy in joules. On a CUDA device it is the board energy of
the job's GPUs (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver
loaded, Volta and newer); on the CPU it is RAPL's package energy
(``/sys/class/powercap/intel-rapl:N/energy_uj``, every package, the whole socket, not only
this job's share), with its wraparound at ``max_energy_range_uj`` handled. Where neither
can be read the meter says why ("RAPL not readable: /sys/class/powercap absent (a VM?)"),
and the energy metrics are None with that reason, never 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONObject

if TYPE_CHECKING:
    from engine.measure.gpu_telemetry import Nvml, NvmlHandle

POWERCAP = Path("/sys/class/powercap")
RAPL_SOURCE = "rapl: CPU package energy (the whole socket, every process on it)"
NVML_SOURCE = "nvml: GPU board energy (total-energy counter)"


@dataclass(frozen=True)
class RaplZone:
    """One top-level RAPL zone (a CPU package): its counter file and where the counter wraps."""

    name: str
    energy_file: Path
    max_range_uj: int


def rapl_zones(root: Path = POWERCAP) -> tuple[list[RaplZone], str | None]:
    """The readable package zones under ``root`` (``intel-rapl:N``, not sub-zones ``intel-rapl:N:M``),
    or ([], why none can be read)."""
    if not root.is_dir():
        return [], f"RAPL not readable: {root} absent (a VM or a kernel without powercap)"
    candidates = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not candidates:
        return [], f"RAPL not readable: no intel-rapl package zone under {root}"
    zones, problems = [], []
    for path in candidates:
        try:
            int((path / "energy_uj").read_text().strip())
            max_range = int((path / "max_energy_range_uj").read_text().strip())
        except (OSError, ValueError) as exc:
            problems.append(f"{path.name}: {exc.strerror if isinstance(exc, OSError) else exc}")
            continue
        name = _read(path / "name") or path.name
        zones.append(RaplZone(name, path / "energy_uj", max_range))
    if not zones:
        return [], "RAPL not readable: " + "; ".join(problems) + " (energy_uj needs root on recent kernels)"
    return zones, None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def rapl_delta_uj(before: int, after: int, max_range_uj: int) -> int:
    """Energy between two readings of one RAPL counter, across at most one wraparound."""
    return after - before if after >= before else after + max_range_uj - before


class RaplCounter:
    """The summed package energy of every RAPL zone, in joules, unwrapped as it is read."""

    def __init__(self, zones: list[RaplZone]) -> None:
        self._zones = zones
        self._last = [self._raw(z) for z in zones]
        self._total_uj = 0

    @staticmethod
    def _raw(zone: RaplZone) -> int:
        return int(zone.energy_file.read_text().strip())

    def joules(self) -> float:
        """Joules since this counter was made (read often enough to see each wrap: minutes apart at most)."""
        for i, zone in enumerate(self._zones):
            now = self._raw(zone)
            self._total_uj += rapl_delta_uj(self._last[i], now, zone.max_range_uj)
            self._last[i] = now
        return self._total_uj / 1e6


def nvml_energy_reader(
    handles: list[NvmlHandle], nvml: Nvml | None = None
) -> tuple[Callable[[], float] | None, str | None]:
    """A function returning the summed NVML energy counters of ``handles`` in joules, or (None, why)."""
    if not handles:
        return None, "no GPU handle (NVML not available)"
    try:
        if nvml is None:
            import pynvml as nvml
        pynvml = nvml
        for h in handles:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported on pre-Volta boards, and others
        return None, f"NVML energy counter not available: {exc}"

    def read() -> float:
        return sum(pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles) / 1000.0

    return read, None


class EnergyMeter:
    """Energy between :meth:`start` and :meth:`stop` from one cumulative counter (NVML or RAPL)."""

    def __init__(
        self,
        device: str,
        gpu_handles: list[NvmlHandle] | None = None,
        powercap_root: Path = POWERCAP,
        nvml: Nvml | None = None,
    ) -> None:
        self.source: str | None = None
        self.unavailable: str | None = None
        self._read: Callable[[], float] | None = None
        if device.startswith("cuda"):
            self._read, self.unavailable = nvml_energy_reader(gpu_handles or [], nvml)
            self.source = NVML_SOURCE if self._read else None
        else:
            zones, self.unavailable = rapl_zones(powercap_root)
            if zones:
                counter = RaplCounter(zones)
                self._read, self.source = counter.joules, RAPL_SOURCE
        self._start: float | None = None
        self.joules: float | None = None

    def read(self) -> float | None:
        """The counter now, in joules (None when unavailable or when reading fails)."""
        if self._read is None:
            return None
        try:
            return self._read()
        except Exception as exc:  # noqa: BLE001 - a counter that stops answering: unavailable, said why
            self.unavailable, self._read = f"energy counter stopped answering: {exc}", None
            return None

    def start(self) -> None:
        self._start = self.read()

    def stop(self) -> float | None:
        """Joules used between start and stop (None, with :attr:`unavailable` saying why)."""
        end = self.read()
        if self._start is not None and end is not None:
            self.joules = max(end - self._start, 0.0)
        return self.joules


def energy_metrics(
    joules: float | None, seconds: float, output_tokens: int, source: str | None, unavailable: str | None
) -> JSONObject:
    """``energy_j``, ``energy_per_output_token_j``, ``avg_power_w`` and where they come from (or why not)."""
    if joules is None:
        return {
            "energy_j": None,
            "energy_per_output_token_j": None,
            "avg_power_w": None,
            "energy_unavailable": unavailable or "no energy counter",
        }
    return {
        "energy_j": round(joules, 3),
        "energy_per_output_token_j": joules / output_tokens if output_tokens > 0 else None,
        "avg_power_w": joules / seconds if seconds > 0 else None,
        "energy_source": source,
    }
