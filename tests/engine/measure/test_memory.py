"""The measured phase's memory: sampled RSS of the job's process tree (children included)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from engine.measure import memory

_CHILD = """
import sys, time
block = bytearray(300 * 2**20)
for i in range(0, len(block), 4096):
    block[i] = 1  # touch every page: resident
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("rescan_s", [0.01, 0.5])
def test_sampler_counts_the_children_of_the_job_process(rescan_s: float) -> None:
    """A child started after the sampler is found at the next rescan of the tree, and its RSS counts."""
    own = memory.tree_rss_bytes()
    sampler = memory.TreeSampler(interval_s=0.01, rescan_s=rescan_s).start()
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + rescan_s + 5
        while sampler.peak_bytes < own + 250 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.01)  # samples while the child holds its 300 MiB (within a rescan of the tree)
        seen_running = sampler.peak_bytes
    finally:
        child.kill()
        child.wait()
    sampler.stop()
    assert seen_running >= own + 250 * 2**20


def test_memory_freed_before_the_phase_is_not_its_peak() -> None:
    import resource

    block = bytearray(400 * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    del block
    memory.release_freed_memory()
    with memory.TreeSampler() as sampler:
        pass
    lifetime_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert sampler.peak_bytes < lifetime_peak - 300 * 2**20  # ru_maxrss would have said +400 MiB


def test_sampling_interval_is_at_most_50_ms() -> None:
    with pytest.raises(ValueError):
        memory.TreeSampler(interval_s=0.2)


def test_peak_metrics_say_what_the_figure_is() -> None:
    assert memory.peak_metrics(None, 123) == {"peak_memory_bytes": 123, "peak_memory_kind": memory.CPU_KIND}
    cuda = memory.peak_metrics((456, memory.CUDA_KIND), 123)
    assert cuda == {"peak_memory_bytes": 456, "peak_memory_kind": "cuda: max allocated during the measured phase"}
    remote = memory.peak_metrics((None, "not measured: remote"), 123)
    assert remote["peak_memory_bytes"] is None and remote["peak_memory_kind"].startswith("not measured")
