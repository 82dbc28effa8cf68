"""Hardware catalog: data-sheet figures for accelerators you may not own, plus the
local devices with figures measured by :mod:`engine.whatif.microbench`.

Throughput figures are DENSE (no 2:4 sparsity), in TFLOP/s (TOPS for int8). Memory
capacity is the data sheet's GB read as 10^9 bytes (conservative where the part
really has GiB); bandwidth in GB/s (10^9 bytes/s). ``None`` means the part has no
such tensor path (e.g. FP8 on Ampere). Each entry names its source; the numbers are
the vendor's claims, and calibration against measured runs is what makes them useful.

This module is pure: no torch import, no device access.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from storage import Database
    from storage.hardware import HardwareMeasurement

PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class Hardware:
    """One device (or the local measured one): memory, bandwidth, compute, interconnect."""

    key: str
    name: str
    vendor: str
    kind: str  # "gpu" | "cpu"
    memory_gb: float
    bandwidth_gbs: float
    tflops: dict[str, float | None] = field(default_factory=dict)
    interconnect: str = ""
    interconnect_gbs: float | None = None  # per-GPU bandwidth to its peers, GB/s
    source: str = ""
    measured: bool = False
    notes: str = ""
    price_per_hour: float | None = None  # USD per device-hour, on demand: an assumption (source and date in notes)

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gbs * 1e9

    def peak_flops(self, precision: str) -> tuple[float, str]:
        """Peak FLOP/s for ``precision``, falling back to a wider path the part has.

        Returns (FLOP/s, the precision actually used) so callers can say what they assumed.
        """
        order = {
            "fp8": ("fp8", "bf16", "fp16", "fp32"),
            "int8": ("int8", "bf16", "fp16", "fp32"),
            "bf16": ("bf16", "fp16", "fp32"),
            "fp16": ("fp16", "bf16", "fp32"),
            "fp32": ("fp32",),
        }
        for p in order.get(precision, (precision, "fp32")):
            value = self.tflops.get(p)
            if value:
                return value * 1e12, p
        raise ValueError(f"{self.name} has no throughput figure for {precision} or any fallback")

    def to_dict(self) -> JSONObject:
        return {
            "key": self.key,
            "name": self.name,
            "vendor": self.vendor,
            "kind": self.kind,
            "memory_gb": self.memory_gb,
            "bandwidth_gbs": self.bandwidth_gbs,
            "tflops": dict(self.tflops),
            "interconnect": self.interconnect,
            "interconnect_gbs": self.interconnect_gbs,
            "source": self.source,
            "measured": self.measured,
            "notes": self.notes,
            "price_per_hour": self.price_per_hour,
        }


def _gpu(
    key: str,
    name: str,
    vendor: str,
    memory_gb: float,
    bandwidth_gbs: float,
    fp32: float,
    bf16: float | None,
    fp16: float | None,
    fp8: float | None,
    int8: float | None,
    interconnect: str,
    interconnect_gbs: float | None,
    source: str,
    notes: str = "",
) -> Hardware:
    return Hardware(
        key=key,
        name=name,
        vendor=vendor,
        kind="gpu",
        memory_gb=memory_gb,
        bandwidth_gbs=bandwidth_gbs,
        tflops={"fp32": fp32, "bf16": bf16, "fp16": fp16, "fp8": fp8, "int8": int8},
        interconnect=interconnect,
        interconnect_gbs=interconnect_gbs,
        source=source,
        notes=notes,
    )


_H100_SHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/); dense = half the sparse figures listed"
)
_A100_SHEET = (
    "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf, "
    "nvidia.com/en-us/data-center/a100/)"
)

# On-demand list prices, USD per device-hour, for the capacity planner's cost: assumptions, not quotes. One
# price per entry, from a public price list, with its date; entries without one have no price (never invented).
_PRICE_CHECKED = "as listed and checked on 2026-05-07 (techbytes.app, 'Serverless GPU Pricing Matrix')"
_PRICES: dict[str, tuple[float, str]] = {
    "h100-sxm": (3.78, f"Lambda on-demand 1x H100 SXM, lambda.ai/pricing, {_PRICE_CHECKED}"),
    "h100-pcie": (2.86, f"Lambda on-demand 1x H100 PCIe, lambda.ai/pricing, {_PRICE_CHECKED}"),
    "a100-80gb": (2.4984, f"Modal A100 80GB, $0.000694 per second, modal.com/pricing, {_PRICE_CHECKED}"),
    "a100-40gb": (1.48, f"Lambda on-demand 1x A100 40GB, lambda.ai/pricing, {_PRICE_CHECKED}"),
    "l40s": (1.9512, f"Modal L40S, $0.000542 per second, modal.com/pricing, {_PRICE_CHECKED}"),
    "l4": (0.7992, f"Modal L4, $0.000222 per second, modal.com/pricing, {_PRICE_CHECKED}"),
    "a10": (0.86, f"Lambda on-demand 1x A10, lambda.ai/pricing, {_PRICE_CHECKED}"),
}


def _priced(hw: Hardware) -> Hardware:
    """The entry with its list price and the price's source in its notes (unchanged without one)."""
    if hw.key not in _PRICES:
        return hw
    price, source = _PRICES[hw.key]
    note = f"price ${price:g}/h on demand: {source}; an assumption, override it (--price {hw.key}=USD)"
    return replace(hw, price_per_hour=price, notes="; ".join(n for n in (hw.notes, note) if n))


CATALOG: dict[str, Hardware] = {
    h.key: _priced(h)
    for h in (
        _gpu(
            "h200",
            "NVIDIA H200 SXM 141GB",
            "NVIDIA",
            141,
            4800,
            67,
            989,
            989,
            1979,
            1979,
            "NVLink 4",
            900,
            "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/); dense = half the sparse figures",
        ),
        _gpu(
            "h100-sxm",
            "NVIDIA H100 SXM 80GB",
            "NVIDIA",
            80,
            3350,
            67,
            989,
            989,
            1979,
            1979,
            "NVLink 4",
            900,
            _H100_SHEET,
        ),
        _gpu(
            "h100-pcie",
            "NVIDIA H100 PCIe 80GB",
            "NVIDIA",
            80,
            2000,
            51,
            756,
            756,
            1513,
            1513,
            "NVLink bridge (PCIe Gen5 128 GB/s without)",
            600,
            _H100_SHEET,
        ),
        _gpu(
            "a100-80gb",
            "NVIDIA A100 SXM 80GB",
            "NVIDIA",
            80,
            2039,
            19.5,
            312,
            312,
            None,
            624,
            "NVLink 3",
            600,
            _A100_SHEET,
        ),
        _gpu(
            "a100-40gb",
            "NVIDIA A100 SXM 40GB",
            "NVIDIA",
            40,
            1555,
            19.5,
            312,
            312,
            None,
            624,
            "NVLink 3",
            600,
            _A100_SHEET,
        ),
        _gpu(
            "l40s",
            "NVIDIA L40S 48GB",
            "NVIDIA",
            48,
            864,
            91.6,
            362,
            362,
            733,
            733,
            "PCIe Gen4 x16 (no NVLink)",
            64,
            "NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s/); dense = half the sparse figures",
        ),
        _gpu(
            "l4",
            "NVIDIA L4 24GB",
            "NVIDIA",
            24,
            300,
            30.3,
            121,
            121,
            242.5,
            242.5,
            "PCIe Gen4 x16 (no NVLink)",
            64,
            "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/); dense = half the sparse figures",
        ),
        _gpu(
            "a10",
            "NVIDIA A10 24GB",
            "NVIDIA",
            24,
            600,
            31.2,
            125,
            125,
            None,
            250,
            "PCIe Gen4 x16 (no NVLink)",
            64,
            "NVIDIA A10 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/products/a10-gpu/)",
        ),
        _gpu(
            "rtx-4090",
            "NVIDIA GeForce RTX 4090 24GB",
            "NVIDIA",
            24,
            1008,
            82.6,
            165.2,
            165.2,
            330.3,
            660.6,
            "PCIe Gen4 x16 (no NVLink)",
            32,
            "NVIDIA Ada Lovelace GPU Architecture whitepaper v2.02, Appendix A (GeForce RTX 4090); "
            "bf16/fp16 and fp8 with FP32 accumulate",
            notes="consumer part: FP16-accumulate paths are 2x faster but not what frameworks use",
        ),
        _gpu(
            "rtx-3090",
            "NVIDIA GeForce RTX 3090 24GB",
            "NVIDIA",
            24,
            936,
            35.6,
            71,
            71,
            None,
            284,
            "NVLink 3 bridge (2-way)",
            56.25,
            "NVIDIA Ampere GA102 GPU Architecture whitepaper v2.0, Appendix A (GeForce RTX 3090); "
            "fp16/bf16 with FP32 accumulate",
        ),
        _gpu(
            "mi300x",
            "AMD Instinct MI300X 192GB",
            "AMD",
            192,
            5300,
            163.4,
            1307.4,
            1307.4,
            2614.9,
            2614.9,
            "AMD Infinity Fabric (7 links x 128 GB/s)",
            896,
            "AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html); "
            "dense figures",
        ),
    )
}

DEFAULT_COMPARISON: tuple[str, ...] = ("h100-sxm", "a100-80gb", "l40s", "rtx-4090")


class UnknownHardware(ValueError):
    """A hardware key that is neither in the catalog nor a measured local device."""


def local_key(device: str) -> str:
    """Catalog key of a measured local device: ``local:cpu``, ``local:cuda:0``."""
    return f"local:{device}"


def from_measurement(m: HardwareMeasurement) -> Hardware:
    """A catalog entry for a local device from a stored micro-benchmark result.

    ``m`` is a :class:`storage.hardware.HardwareMeasurement` (or anything with the same
    attributes). Memory capacity is what the system reported at measuring time.
    """
    matmul = dict(m.matmul_tflops or {})
    tflops: dict[str, float | None] = {p: matmul.get(p) for p in PRECISIONS}
    kind = "cpu" if m.device == "cpu" else "gpu"
    return Hardware(
        key=local_key(m.device),
        name=f"{m.device_name} (local, measured)",
        vendor="local",
        kind=kind,
        memory_gb=(m.memory_bytes or 0) / 1e9,
        bandwidth_gbs=m.copy_gbs,
        tflops=tflops,
        interconnect="",
        interconnect_gbs=None,
        source=f"measured here by engine.whatif.microbench on {m.created_at:%Y-%m-%d %H:%M} UTC "
        f"(host {m.host}, {m.threads} threads, measurement {m.id})",
        measured=True,
    )


def catalog(db: Database | None = None) -> dict[str, Hardware]:
    """The data-sheet catalog plus, given a database, the newest measured local devices."""
    entries = dict(CATALOG)
    if db is not None:
        from storage.hardware import latest_per_device

        for m in latest_per_device(db):
            entries[local_key(m.device)] = from_measurement(m)
    return entries


def get_hardware(key: str, entries: dict[str, Hardware] | None = None) -> Hardware:
    """One entry by key; raises :class:`UnknownHardware` with the choices."""
    entries = CATALOG if entries is None else entries
    key = key.strip().lower()
    if key in entries:
        return entries[key]
    choices = ", ".join(sorted(entries))
    hint = " (measure it first: python -m engine calibrate)" if key.startswith("local:") else ""
    raise UnknownHardware(f"unknown hardware {key!r}{hint}; choose from: {choices}")


def with_memory(hw: Hardware, memory_gb: float) -> Hardware:
    """A copy with another capacity (e.g. a 94 GB H100 NVL variant)."""
    return replace(hw, memory_gb=memory_gb)
