"""Diagnostics of one run: findings with their evidence and what to do (pure: the caller reads storage).

:func:`diagnose` takes a stored run (``metrics``, ``provenance``), its raw requests and its
side records (``"telemetry"``, ``"server_metrics"``) and returns :class:`Finding`s, most
severe first:

- ``throttling``: clocks pulled down by power or heat (NVML's clocks-event reasons), a GPU or
  CPU at :data:`HOT_C` °C or more, or SM clocks below :data:`CLOCK_DROP` of the run's highest
  while the GPU is busy;
- ``memory_growth``: :mod:`engine.report.diagnostics_memory` (slope against requests served);
- ``p99_spikes``: :mod:`engine.report.diagnostics_spikes` (which requests, when, what coincided);
- ``contention``: the run's machine noise flags (other processes' CPU time, steal, a busy GPU:
  :mod:`engine.run.noise`) with the telemetry windows where the load average was above the
  core count, the hypervisor stole time, or other processes computed on the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping
from engine.measure.gpu_telemetry import SLOWDOWN_MASK, THERMAL_MASK, throttle_names
from engine.report.diagnostics_base import (
    Finding,
    present,
    sample_rows,
    sort_findings,
    span_words,
    times,
    values,
    windows,
    worst,
)
from engine.report.diagnostics_memory import memory_growth
from engine.report.diagnostics_spikes import STEAL_PCT, p99_spikes

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord
    from storage.runs import RunDetail

HOT_C = 85.0
CLOCK_DROP = 0.85  # SM clock below this share of the run's highest, while busy
BUSY_PCT = 50.0
LOAD_MARGIN = 0.5  # the job itself keeps about one thread per core runnable
__all__ = ["Finding", "diagnose", "contention", "throttling"]


def diagnose(
    run: RunDetail,
    requests: Sequence[RequestRecord] | None,
    telemetry: JSONMapping | None,
    server_metrics: JSONMapping | None = None,
) -> list[Finding]:
    """Every finding of a run (most severe first); [] for a run with nothing to say or no evidence."""
    metrics = getattr(run, "metrics", None) or {}
    noise = (getattr(run, "provenance", None) or {}).get("noise")
    findings = throttling(telemetry)
    findings += memory_growth(telemetry)
    findings += p99_spikes(requests or [], telemetry, server_metrics)
    findings += contention(telemetry, metrics.get("noise_flags"), noise)
    return sort_findings(findings)


def _gpu_throttling(tele: JSONMapping) -> tuple[list[bool], list[str], list[str]]:
    """(hit per sample, reason names, detail lines) from the GPU fields."""
    t_s = times(tele)
    n = len(t_s)
    hits = [False] * n
    details, names = [], set()
    masks = present(tele, "gpu_throttle_mask")
    for i, mask in masks:
        if int(mask) & SLOWDOWN_MASK:
            hits[i] = True
            names.update(throttle_names(int(mask) & SLOWDOWN_MASK))
    if names:
        share = sum(hits) / max(len(masks), 1)
        details.append(f"NVML clocks-event reasons {', '.join(sorted(names))} in {share:.0%} of the samples")
    hot = [(i, t) for i, t in present(tele, "gpu_temp_c") if t >= HOT_C]
    for i, _ in hot:
        hits[i] = True
    if hot:
        details.append(f"GPU at {max(t for _, t in hot):.0f} °C (>= {HOT_C:.0f} °C) in {len(hot)} samples")
    sm, util = dict(present(tele, "gpu_sm_clock_mhz")), dict(present(tele, "gpu_util_pct"))
    if sm:
        top = max(sm.values())
        low = [i for i, mhz in sm.items() if mhz < CLOCK_DROP * top and util.get(i, 0) >= BUSY_PCT]
        for i in low:
            hits[i] = True
        if low:
            details.append(
                f"SM clock down to {min(sm[i] for i in low):.0f} MHz (highest {top:.0f}) while busy, {len(low)} samples"
            )
    return hits, sorted(names), details


def throttling(tele: JSONMapping | None) -> list[Finding]:
    """Thermal or power throttling of the GPU (clocks-event reasons, temperature, clocks down) or a hot CPU."""
    if not tele or not times(tele):
        return []
    hits, names, details = _gpu_throttling(tele)
    hot_cpu = [(i, t) for i, t in present(tele, "cpu_temp_c") if t >= HOT_C]
    for i, _ in hot_cpu:
        hits[i] = True
    if hot_cpu:
        details.append(f"CPU at {max(t for _, t in hot_cpu):.0f} °C (>= {HOT_C:.0f} °C) in {len(hot_cpu)} samples")
    if not details:
        return []
    t_s = times(tele)
    wins = windows(t_s, hits)
    details.append(f"when: {span_words(wins)}")
    hot_idx = [i for i, h in enumerate(hits) if h]
    temp = values(tele, "gpu_temp_c") or values(tele, "cpu_temp_c")
    picked = worst(hot_idx, lambda i: float(temp[i] or 0) if i < len(temp) else 0.0)
    cols = ["gpu_temp_c", "gpu_sm_clock_mhz", "gpu_power_w", "gpu_throttle_mask", "cpu_temp_c", "cpu_freq_mhz"]
    thermal = any(int(m) & THERMAL_MASK for _, m in present(tele, "gpu_throttle_mask")) or hot_cpu
    kind_words = "thermal" if thermal or any("°C" in d for d in details) else "power"
    return [
        Finding(
            kind="throttling",
            severity="critical" if any("hw_" in n for n in names) else "warning",
            title=f"{kind_words.capitalize()} throttling: clocks pulled down during {len(wins)} window(s)",
            evidence={
                "details": details,
                "windows": wins,
                "samples": sample_rows(tele, picked, [c for c in cols if values(tele, c)]),
                "reasons": names,
            },
            suggestion=(
                "Latency measured while throttled is not the recipe's: check cooling and airflow, the power limit "
                "(nvidia-smi -q -d POWER,PERFORMANCE), and rerun after the device cools down; for steady numbers "
                "lock the clocks (nvidia-smi -lgc) or leave time between runs."
            ),
        )
    ]


def _telemetry_contention(tele: JSONMapping | None) -> tuple[list[str], list[list[float]]]:
    if not tele or not times(tele):
        return [], []
    t_s, cores = times(tele), tele.get("cpu_cores") or 1
    lines, hits = [], [False] * len(t_s)
    checks = (
        ("load_1m", lambda v: v > cores + LOAD_MARGIN, lambda v: f"load average up to {v:.1f} on {cores} cores"),
        ("steal_pct", lambda v: v >= STEAL_PCT, lambda v: f"CPU steal up to {v:.0f} %"),
        ("gpu_other_procs", lambda v: v > 0, lambda v: f"up to {v:.0f} other process(es) computing on the GPU"),
    )
    for name, test, words in checks:
        found = [(i, v) for i, v in present(tele, name) if test(v)]
        for i, _ in found:
            hits[i] = True
        if found:
            lines.append(f"{words(max(v for _, v in found))} in {len(found)} of {len(t_s)} samples")
    procs = tele.get("gpu_other_processes") or []
    if procs:
        lines.append("on the GPU: " + ", ".join(f"{p.get('name')} (pid {p.get('pid')})" for p in procs[:5]))
    return lines, windows(t_s, hits)


def contention(
    tele: JSONMapping | None, flags: Sequence[JSONMapping] | None, noise: JSONMapping | None = None
) -> list[Finding]:
    """Other processes on the machine or the GPU, steal, or a load above the core count."""
    machine = [f for f in flags or [] if f.get("kind") == "machine"]
    lines, wins = _telemetry_contention(tele)
    if not machine and not lines:
        return []
    details = [f"{f.get('flag')}: {f.get('detail')}" for f in machine] + lines
    if wins:
        details.append(f"when: {span_words(wins)}")
    busy = list((noise or {}).get("busy_processes") or [])
    return [
        Finding(
            kind="contention",
            severity="warning",
            title="Contention: the machine was not the job's alone",
            evidence={"details": details, "windows": wins, "processes": busy},
            suggestion=(
                "These figures include other work's interference: rerun on a quiet machine (stop the processes "
                "listed, or pin them elsewhere), give the job whole cores (taskset / OMP_NUM_THREADS below the "
                "core count), and on a GPU wait for other processes to finish; compare with a quiet run before "
                "deciding."
            ),
        )
    ]
