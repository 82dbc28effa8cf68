"""Memory during the measured phase: the resident set size of the job's process tree, sampled.

On the CPU the runner starts a :class:`TreeSampler` as the measured phase starts and
stops it as the phase ends: a daemon thread reads the RSS of the job process and all its
descendants (a vLLM server and its engine core, tensor-parallel ranks) every
``interval_s`` (<= 50 ms) and keeps the largest sum. Finding the descendants reads every process's
``/proc`` entry (about 1 ms on a quiet machine, more on a busy one): it is done every ``rescan_s``
(0.5 s), and between scans only the known processes' RSS is read, so the sampler does not take the
CPU (and the interpreter lock) the engine it measures needs; a child that lives less than a rescan
may go unseen. Unlike ``ru_maxrss`` (the process's
lifetime peak) it excludes the float32 load before quantizing, warm-up and earlier runs
in the same process. On CUDA the backend reports ``torch.cuda.max_memory_allocated``
after a reset at the start of the phase instead (:data:`CUDA_KIND`).
"""

from __future__ import annotations

import os
import threading
import time

import psutil

from engine.jsonvalue import JSONObject

CPU_KIND = "cpu: sampled RSS of the job's process tree during the measured phase"
CUDA_KIND = "cuda: max allocated during the measured phase"


def tree_processes(pid: int | None = None) -> list[psutil.Process]:
    """A process and all its descendants now ([] when it is gone)."""
    try:
        root = psutil.Process(pid or os.getpid())
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def rss_bytes(procs: list[psutil.Process]) -> int:
    """Summed RSS of ``procs`` (processes that vanished meanwhile count 0)."""
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def tree_rss_bytes(pid: int | None = None) -> int:
    """RSS of a process and all its descendants now (processes that vanish meanwhile count 0)."""
    return rss_bytes(tree_processes(pid))


class TreeSampler:
    """Peak RSS of a process tree between ``start()`` and ``stop()``, sampled by a thread."""

    def __init__(self, pid: int | None = None, interval_s: float = 0.02, rescan_s: float = 0.5) -> None:
        if not 0 < interval_s <= 0.05:
            raise ValueError("sample at least every 50 ms")
        self._pid = pid or os.getpid()
        self._interval_s = interval_s
        self._rescan_s = rescan_s
        self._procs: list[psutil.Process] = []
        self._next_scan = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak_bytes = 0
        self.samples = 0

    def _sample(self) -> None:
        now = time.monotonic()
        if now >= self._next_scan:  # the tree again: children started or ended
            self._procs, self._next_scan = tree_processes(self._pid), now + self._rescan_s
        rss = rss_bytes(self._procs)
        self.samples += 1
        if rss > self.peak_bytes:
            self.peak_bytes = rss

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def start(self) -> TreeSampler:
        """Take a first sample now and keep sampling in the background."""
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> int:
        """Stop sampling (one last sample first, of the tree as it is now); returns the peak in bytes."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._next_scan = 0.0
            self._sample()
        return self.peak_bytes

    def __enter__(self) -> TreeSampler:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def peak_metrics(engine_peak: tuple[int | None, str] | None, sampled_bytes: int) -> JSONObject:
    """``peak_memory_bytes`` and ``peak_memory_kind``: the engine's own figure where it has one
    (CUDA max allocated; None with a reason for a remote server), else the sampled RSS."""
    if engine_peak is not None:
        value, kind = engine_peak
        return {"peak_memory_bytes": value, "peak_memory_kind": kind}
    return {"peak_memory_bytes": sampled_bytes or None, "peak_memory_kind": CPU_KIND}


def release_freed_memory() -> None:
    """Give memory freed since loading (the float32 weights before quantizing) back to the OS.

    glibc keeps freed heap pages mapped, so without this the RSS sampled later would still
    include them. Best effort: nothing happens outside glibc.
    """
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
