"""Calibration micro-benchmark of a local device: copy bandwidth and matmul throughput.

A few seconds at most on a small CPU. torch is imported inside the functions, so
importing this module stays cheap (pages may import it to spawn the CLI).

- Copy bandwidth: ``dst.copy_(src)`` on a buffer larger than the last-level cache,
  counted as bytes read + bytes written (STREAM "copy" convention), best of N.
- Matmul throughput: square ``a @ b`` in each precision that the device runs, 2*n^3
  FLOP per product, best of N.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    import torch

    from engine.jsonvalue import JSONObject
    from storage import Database

CPU_PRECISIONS: tuple[str, ...] = ("fp32", "bf16")
CUDA_PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class MicrobenchResult:
    """What one micro-benchmark measured on one device."""

    device: str
    device_name: str
    copy_gbs: float
    matmul_tflops: dict[str, float]
    memory_bytes: int | None
    threads: int | None
    duration_s: float
    details: JSONObject = field(default_factory=dict)


def _cpu_name() -> str:
    from engine.measure.provenance import cpu_model

    return cpu_model()


def _system_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _device(torch: ModuleType, device: str) -> tuple[torch.device, str, int | None, int | None, bool]:
    """(torch device, name, memory bytes, CPU threads, is GPU) of ``cpu`` or ``cuda:N``."""
    if device == "cpu":
        return torch.device("cpu"), _cpu_name(), _system_memory_bytes(), torch.get_num_threads(), False
    if not device.startswith("cuda:"):
        raise ValueError(f"device {device!r} is not 'cpu' or 'cuda:N'")
    if not torch.cuda.is_available():
        raise ValueError(f"device {device} was asked for but CUDA is not available here")
    index = int(device.split(":")[1])
    if index >= torch.cuda.device_count():
        raise ValueError(f"device {device} does not exist; this machine has {torch.cuda.device_count()} GPU(s)")
    dev = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(dev)
    return dev, props.name, int(props.total_memory), None, True


def _best_s(torch: ModuleType, dev: torch.device, fn: Callable[[], object], repeats: int) -> float:
    """Fastest of ``repeats`` timed calls of ``fn`` after one warm-up (synchronized on a GPU)."""

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return min(times)


def run_microbench(
    device: str = "cpu",
    copy_mb: int = 64,
    matmul_n: int = 512,
    repeats: int = 5,
    precisions: tuple[str, ...] | None = None,
) -> MicrobenchResult:
    """Measure ``device`` (``cpu`` or ``cuda:N``); small defaults finish in ~1-3 s on 2 cores.

    Raises ValueError for a device this machine does not have.
    """
    import torch

    start = time.perf_counter()
    dev, name, memory, threads, gpu = _device(torch, device)
    precisions = precisions or (CUDA_PRECISIONS if gpu else CPU_PRECISIONS)
    if gpu:
        copy_mb, matmul_n = max(copy_mb, 1024), max(matmul_n, 8192)

    n_bytes = copy_mb * 1024 * 1024
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    copy_gbs = 2 * n_bytes / _best_s(torch, dev, lambda: dst.copy_(src), repeats) / 1e9

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    matmul: dict[str, float] = {}
    per_precision_s: dict[str, float] = {}
    for p in precisions:
        a = torch.randn(matmul_n, matmul_n, device=dev).to(dtypes[p])
        b = torch.randn(matmul_n, matmul_n, device=dev).to(dtypes[p])
        per_precision_s[p] = _best_s(torch, dev, lambda a=a, b=b: torch.matmul(a, b), repeats)
        matmul[p] = 2 * matmul_n**3 / per_precision_s[p] / 1e12
    return MicrobenchResult(
        device=device,
        device_name=name,
        copy_gbs=copy_gbs,
        matmul_tflops=matmul,
        memory_bytes=memory,
        threads=threads,
        duration_s=time.perf_counter() - start,
        details={
            "copy_mb": copy_mb,
            "matmul_n": matmul_n,
            "repeats": repeats,
            "torch": torch.__version__,
            "best_s": per_precision_s,
            "load_avg": list(os.getloadavg()),
        },
    )


def store(db: Database, result: MicrobenchResult) -> int:
    """Save a result in the database (storage.hardware); returns the measurement id."""
    from storage.hardware import NewMeasurement, save_measurement

    return save_measurement(
        db,
        NewMeasurement(
            host=socket.gethostname(),
            device=result.device,
            device_name=result.device_name,
            copy_gbs=result.copy_gbs,
            matmul_tflops=dict(result.matmul_tflops),
            duration_s=result.duration_s,
            memory_bytes=result.memory_bytes,
            threads=result.threads,
            details=dict(result.details),
        ),
    )


def measure_in_subprocess(db_url: str, device: str = "cpu", timeout_s: float = 120.0) -> tuple[bool, str]:
    """Run ``python -m engine calibrate`` in a child process (keeps torch out of the caller).

    Returns (ok, the last line of its output or the reason it failed).
    """
    from engine.settings import REPO_ROOT

    cmd = [sys.executable, "-m", "engine", "calibrate", "--db", db_url, "--device", device]
    try:
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            cwd=REPO_ROOT,
            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
        )
    except subprocess.TimeoutExpired:
        return False, f"the micro-benchmark did not finish within {timeout_s:.0f} s"
    except OSError as exc:
        return False, f"cannot start the micro-benchmark: {exc}"
    text = (out.stdout.strip() or out.stderr.strip()).splitlines()
    last = text[-1] if text else ""
    if out.returncode != 0:
        err = out.stderr.strip().splitlines()
        return False, err[-1] if err else f"exit code {out.returncode}"
    return True, last


def measure_once(db: Database, device: str = "cpu", log: Callable[[str], object] | None = None) -> int | None:
    """Measure ``device`` here unless it was measured before (``make run``'s first start): the Launch
    page's first estimate then has a time. Returns the new measurement's id, None when one existed."""
    from storage.hardware import list_measurements

    host = socket.gethostname()
    if any(m.host == host for m in list_measurements(db, device=device, limit=20)):
        return None
    result = run_microbench(device)
    mid = store(db, result)
    if log is not None:
        log(
            f"measured this machine's {device} once for the estimates (measurement {mid}; redo: python -m engine calibrate)"
        )
    return mid
