"""The devices a Ray cluster offers, for the Launch page and ``python -m engine knobs`` when the app
is configured with a Ray address (``LATENCYLAB_RAY_ADDRESS``), without importing Ray here: the facts
come from ``python -m engine.jobs.ray_cluster describe`` in a child process, kept for a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field

from engine.settings import REPO_ROOT, get_settings

KEEP_S = 60.0
TIMEOUT_S = 30.0
_cache: dict[str, tuple[float, ClusterDevices]] = {}


@dataclass(frozen=True)
class ClusterDevices:
    """A cluster's summary (``ray: 2 nodes — 8 × H100, 4 × A100``) and the device slots jobs may name;
    ``problem`` says why there are none (no cluster at the address, Ray not installed)."""

    address: str
    summary: str = ""
    devices: list[str] = field(default_factory=list)
    max_gpus_per_node: int = 0
    problem: str | None = None


def configured_address() -> str | None:
    """The Ray address the app is configured with, if any."""
    return get_settings().ray_address


def cluster_devices(address: str | None = None, *, fresh: bool = False) -> ClusterDevices | None:
    """The cluster at ``address`` (default: the configured one); None when no Ray address is configured."""
    address = address or configured_address()
    if not address:
        return None
    kept = _cache.get(address)
    if kept is not None and not fresh and time.monotonic() - kept[0] < KEEP_S:
        return kept[1]
    info = _describe(address)
    _cache[address] = (time.monotonic(), info)
    return info


def _describe(address: str) -> ClusterDevices:
    command = [sys.executable, "-m", "engine.jobs.ray_cluster", "describe", address]
    try:
        out = subprocess.run(
            command, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ClusterDevices(address, problem=f"the Ray cluster at {address} did not answer: {exc}")
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return ClusterDevices(address, problem=lines[-1] if lines else f"exit {out.returncode}")
    try:
        facts = json.loads(out.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError) as exc:
        return ClusterDevices(address, problem=f"unreadable cluster facts: {exc}")
    return ClusterDevices(address, facts["summary"], list(facts["devices"]), int(facts.get("max_gpus_per_node", 0)))
