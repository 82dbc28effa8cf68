"""Derived metrics: pure functions over raw stamps (see DESIGN.md, "Metrics").

Definitions, comparable with vLLM's ``bench serve`` and NVIDIA's GenAI-Perf/AIPerf:

* TTFT = first token-bearing chunk - send (client-side queueing kept apart).
* E2EL = last token-bearing chunk - send.
* TPOT = (E2EL - TTFT) / (N_out - 1) per request; requests with N_out <= 1 are left
  out. GenAI-Perf/AIPerf call this ITL.
* ITL = every gap between consecutive token-bearing chunks, pooled over requests
  (AIPerf's ICL).
* Throughput = output tokens / measured duration; requests/s likewise.
* Goodput = requests meeting every SLO / duration; failures count as misses. With no
  SLO set, goodput and its fraction are None ("no SLO set"), never a copy of requests/s.
* Error rate = failed / (completed + failed) measured requests.
* Queueing = send - arrival: how long a request waited client-side after the measured
  phase started (its due time, for an arrival process) before it was sent.
* Schedule (requests with due times only): send minus due and whether the schedule was kept
  (:mod:`engine.measure.schedule`), stored as ``metrics["schedule"]``.

Percentiles use numpy's linear interpolation. Warm-up requests are excluded and
counted.

Confidence (95 %, :mod:`engine.measure.stats`), stored beside each figure:

* Every latency group (``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2el_ms``, ``queue_ms``)
  carries ``n`` (its samples) and ``ci = {"p50": [lo, hi] | None, ..., "mean": ...}``.
  Percentiles: the exact order-statistic interval; None ("n too small") when the sample
  cannot support the percentile (p50 needs 6 samples, p90 29, p95 59, p99 299). Mean:
  Student's t interval (None below 2 samples). ITL gaps are pooled, so their intervals
  treat gaps as independent and are narrower than request-level ones.
* ``metrics["ci"]`` holds the throughput intervals, ``[lo, hi]`` or None:
  ``tokens_per_s_per_user`` is the t interval of the mean of the per-request 1/TPOT;
  ``output_tokens_per_s`` and ``requests_per_s`` come from a seeded bootstrap over
  measured requests of (output tokens or 1 if completed, share of the run's duration),
  a request's share being its send-to-last-token span scaled so all shares sum to the
  duration (the statistic at the sample is exactly tokens / duration). At least 6
  requests are needed. These are within-run intervals of one trial: run-to-run drift is
  not in them; across trials use :func:`engine.measure.stats.repeats_ci`.
* Runs stored before intervals have neither; :func:`interval_fields` computes them from
  the stored requests.

Which figures there are, how each is computed and how its interval is made is declared once
per metric in :mod:`engine.measure.declarations`; :func:`compute_metrics` runs every
declaration. The per-request primitives live in :mod:`engine.measure.stamps` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from engine.jsonvalue import JSONObject
from engine.measure import registry, stats
from engine.measure.records import RequestRecord, RunRecord
from engine.measure.schedule import schedule_of_records
from engine.measure.stamps import (
    MIN_THROUGHPUT_REQUESTS,
    NS_PER_MS,
    SLO,
    Phase,
    e2el_ns,
    group_samples,
    itl_gaps_ns,
    meets_slo,
    per_user_samples,
    throughput_rows,
    tpot_ns,
    ttft_ns,
)

__all__ = [
    "MIN_THROUGHPUT_REQUESTS",
    "NS_PER_MS",
    "PERCENTILES",
    "SLO",
    "compute_metrics",
    "e2el_ns",
    "group_samples",
    "interval_fields",
    "itl_gaps_ns",
    "latency_group",
    "meets_slo",
    "per_user_samples",
    "request_table",
    "summarize",
    "throughput_intervals",
    "throughput_rows",
    "tpot_ns",
    "ttft_ns",
]

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


def summarize(values: Iterable[float]) -> dict[str, float | None]:
    """Mean and p50/p90/p95/p99 (linear interpolation); ``None`` for no values."""
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    keys = ["mean"] + [f"p{p}" for p in PERCENTILES]
    if arr.size == 0:
        return dict.fromkeys(keys)
    out: dict[str, float | None] = {"mean": float(arr.mean())}
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES, method="linear"), strict=True):
        out[f"p{p}"] = float(v)
    return out


def latency_intervals(values: Sequence[float] | np.ndarray) -> JSONObject:
    """``{"n": samples, "ci": {"p50": [lo, hi] | None, ..., "mean": [lo, hi] | None}}`` (see the module doc).

    The samples are turned into an array and sorted once for every percentile."""
    arr = np.asarray(values, dtype=np.float64)
    ordered = np.sort(arr)
    ordered = ordered[np.isfinite(ordered)]
    ci: dict[str, list[float] | None] = {
        f"p{p}": stats.pair(stats.percentile_ci(ordered, p, presorted=True)) for p in PERCENTILES
    }
    ci["mean"] = stats.pair(stats.mean_ci(arr))
    return {"n": len(values), "ci": ci}


def latency_group(values: Sequence[float]) -> JSONObject:
    """:func:`summarize` plus its sample count and intervals (the samples made an array once)."""
    arr = np.asarray(values, dtype=np.float64)
    return {**summarize(arr), **latency_intervals(arr)}


def scalar_interval(metric: registry.Metric, phase: Phase) -> list[float] | None:
    """The 95 % interval of a scalar figure by its declared rule (``mean`` or ``bootstrap``), or None."""
    samples = metric.samples(phase) if metric.samples is not None else None
    if samples is None:
        return None
    if metric.interval == "mean":
        return stats.pair(stats.mean_ci(samples))
    if metric.interval == "bootstrap":
        return stats.pair(stats.bootstrap_ci(samples, stats.sum_ratio))
    return None


def throughput_intervals(requests: Sequence[RequestRecord], duration_s: float) -> dict[str, list[float] | None]:
    """``{"output_tokens_per_s": [lo, hi] | None, "requests_per_s": ..., "tokens_per_s_per_user": ...}``:
    every scalar declared with an interval."""
    phase = Phase(requests, duration_s)
    return {m.key: scalar_interval(m, phase) for m in registry.with_interval()}


def interval_fields(requests: Sequence[RequestRecord], duration_s: float) -> JSONObject:
    """The confidence fields of :func:`compute_metrics` from raw requests (for runs stored without them).

    ``{"ttft_ms": {"n": .., "ci": {..}}, ..., "ci": {throughput intervals}}``.
    """
    phase = Phase(requests, duration_s)
    out: JSONObject = {g.key: latency_intervals(g.samples(phase)) for g in registry.GROUPS}
    out["ci"] = throughput_intervals(requests, duration_s)
    return out


def compute_metrics(run: RunRecord, slo: SLO | None = None) -> JSONObject:
    """The metric set of DESIGN.md for one measured phase (warm-up excluded): every latency group,
    the scalar intervals under ``ci``, then every declared figure with a computation."""
    duration_s = max(run.end_ns - run.start_ns, 1) / 1e9
    phase = Phase(run.requests, duration_s, slo, run.due_times)
    out: JSONObject = {
        g.key: latency_group(samples)
        for g in registry.GROUPS
        if (samples := g.samples(phase)) or not g.optional  # latency from due: only where requests had due times
    }
    out["ci"] = {m.key: scalar_interval(m, phase) for m in registry.with_interval()}
    out.update({m.key: m.compute(phase) for m in registry.computed() if m.compute is not None})
    out["slo"] = None if slo is None else {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2el_ms": slo.e2el_ms}
    if run.due_times:  # was the schedule kept? (engine.measure.schedule: send minus due against the gaps)
        out["schedule"] = schedule_of_records(run.requests)
    return out


def request_table(requests: Sequence[RequestRecord]) -> list[JSONObject]:
    """Per-request derived values in ms (for timelines and CDFs)."""
    rows = []
    for r in requests:
        t, e, p = ttft_ns(r), e2el_ns(r), tpot_ns(r)
        rows.append(
            {
                "index": r.index,
                "warmup": r.warmup,
                "ok": r.ok,
                "error": r.error,
                "queue_ms": (r.send_ns - r.arrival_ns) / NS_PER_MS,
                "ttft_ms": None if t is None else t / NS_PER_MS,
                "tpot_ms": None if p is None else p / NS_PER_MS,
                "e2el_ms": None if e is None else e / NS_PER_MS,
                "output_tokens": r.output_tokens,
                "prompt_tokens": r.prompt_tokens,
            }
        )
    return rows
