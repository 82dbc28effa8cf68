"""Device strings of a spec (``cpu``, ``cuda:N``, ``cuda:N,M,...``): the one parser of GPU indices and counts."""

from __future__ import annotations

import re

DEVICE_PATTERN = re.compile(r"^(cpu|cuda:\d+(,\d+)*)$")


def gpu_indices(device: str) -> list[int]:
    """``cuda:0,1`` -> [0, 1]; ``cpu`` -> []."""
    if not device.startswith("cuda:"):
        return []
    return [int(i) for i in device.split(":", 1)[1].split(",")]


def gpu_count(device: str) -> int:
    """GPUs a device string picks (0 for the CPU)."""
    return len(gpu_indices(device))
