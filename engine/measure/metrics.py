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
  not in them; across trials use :func:`engine.measure.stats.trials_ci`.
* Runs stored before intervals have neither; :func:`interval_fields` computes them from
  the stored requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.measure import stats
from engine.measure.records import RequestRecord, RunRecord

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class SLO:
    """Service-level objectives in ms; ``None`` means no limit on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None


def summarize(values: Iterable[float]) -> dict[str, float | None]:
    """Mean and p50/p90/p95/p99 (linear interpolation); ``None`` for no values."""
    arr = np.asarray(list(values), dtype=float)
    keys = ["mean"] + [f"p{p}" for p in PERCENTILES]
    if arr.size == 0:
        return dict.fromkeys(keys)
    out: dict[str, float | None] = {"mean": float(arr.mean())}
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES, method="linear"), strict=True):
        out[f"p{p}"] = float(v)
    return out


CI_KEYS: tuple[str, ...] = ("output_tokens_per_s", "requests_per_s", "tokens_per_s_per_user")
MIN_THROUGHPUT_REQUESTS = 6  # as for a p50: fewer requests give no throughput interval


def latency_intervals(values: Sequence[float]) -> dict[str, Any]:
    """``{"n": samples, "ci": {"p50": [lo, hi] | None, ..., "mean": [lo, hi] | None}}`` (see the module doc)."""
    ci: dict[str, list[float] | None] = {f"p{p}": stats.pair(stats.percentile_ci(values, p)) for p in PERCENTILES}
    ci["mean"] = stats.pair(stats.mean_ci(values))
    return {"n": len(values), "ci": ci}


def latency_group(values: Sequence[float]) -> dict[str, Any]:
    """:func:`summarize` plus its sample count and intervals."""
    return {**summarize(values), **latency_intervals(values)}


def throughput_rows(requests: Sequence[RequestRecord], duration_s: float) -> dict[str, np.ndarray] | None:
    """Per measured request: ``(output tokens, duration share)`` and ``(completed 0/1, duration share)``.

    A request's share is its send-to-last-token span scaled so all shares sum to ``duration_s``;
    summed tokens over summed shares is exactly the run's output tokens/s. None when there are
    fewer than MIN_THROUGHPUT_REQUESTS measured requests or no span at all.
    """
    measured = [r for r in requests if not r.warmup]
    spans = np.asarray([max((e2el_ns(r) or 0), 0) for r in measured], dtype=float)
    if len(measured) < MIN_THROUGHPUT_REQUESTS or spans.sum() <= 0 or duration_s <= 0:
        return None
    shares = spans * duration_s / spans.sum()
    tokens = [r.output_tokens if r.ok else 0 for r in measured]
    done = [1.0 if r.ok else 0.0 for r in measured]
    return {"output_tokens_per_s": np.c_[tokens, shares], "requests_per_s": np.c_[done, shares]}


def per_user_samples(requests: Sequence[RequestRecord]) -> list[float]:
    """Each successful measured request's tokens/s per user, 1000 / TPOT [ms]."""
    ok = [r for r in requests if not r.warmup and r.ok]
    return [1e9 / v for r in ok if (v := tpot_ns(r)) is not None and v > 0]


def throughput_intervals(requests: Sequence[RequestRecord], duration_s: float) -> dict[str, list[float] | None]:
    """``{"output_tokens_per_s": [lo, hi] | None, "requests_per_s": ..., "tokens_per_s_per_user": ...}``."""
    out: dict[str, list[float] | None] = dict.fromkeys(CI_KEYS)
    out["tokens_per_s_per_user"] = stats.pair(stats.mean_ci(per_user_samples(requests)))
    for key, rows in (throughput_rows(requests, duration_s) or {}).items():
        out[key] = stats.pair(stats.bootstrap_ci(rows, stats.sum_ratio))
    return out


def interval_fields(requests: Sequence[RequestRecord], duration_s: float) -> dict[str, Any]:
    """The confidence fields of :func:`compute_metrics` from raw requests (for runs stored without them).

    ``{"ttft_ms": {"n": .., "ci": {..}}, ..., "ci": {throughput intervals}}``.
    """
    out: dict[str, Any] = {group: latency_intervals(values) for group, values in group_samples(requests).items()}
    out["ci"] = throughput_intervals(requests, duration_s)
    return out


def group_samples(requests: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """Each latency group's samples in ms (measured requests; successful ones but for queueing)."""
    measured = [r for r in requests if not r.warmup]
    ok = [r for r in measured if r.ok]
    return {
        "ttft_ms": [v / NS_PER_MS for r in ok if (v := ttft_ns(r)) is not None],
        "tpot_ms": [v / NS_PER_MS for r in ok if (v := tpot_ns(r)) is not None],
        "itl_ms": [g / NS_PER_MS for r in ok for g in itl_gaps_ns(r)],
        "e2el_ms": [v / NS_PER_MS for r in ok if (v := e2el_ns(r)) is not None],
        "queue_ms": [(r.send_ns - r.arrival_ns) / NS_PER_MS for r in measured],
    }


def _token_chunks(req: RequestRecord) -> list[int]:
    return [t for t, n in zip(req.chunk_ns, req.chunk_tokens, strict=True) if n > 0]


def ttft_ns(req: RequestRecord) -> int | None:
    stamps = _token_chunks(req)
    return stamps[0] - req.send_ns if stamps else None


def e2el_ns(req: RequestRecord) -> int | None:
    stamps = _token_chunks(req)
    return stamps[-1] - req.send_ns if stamps else None


def tpot_ns(req: RequestRecord) -> float | None:
    """Mean time per output token after the first; None when N_out <= 1."""
    n_out = req.output_tokens
    first, last = ttft_ns(req), e2el_ns(req)
    if n_out <= 1 or first is None or last is None:
        return None
    return (last - first) / (n_out - 1)


def itl_gaps_ns(req: RequestRecord) -> list[int]:
    stamps = _token_chunks(req)
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


def meets_slo(req: RequestRecord, slo: SLO) -> bool:
    """Whether a request met every SLO; a failed request never does."""
    if not req.ok or req.output_tokens == 0:
        return False
    checks = ((slo.ttft_ms, ttft_ns(req)), (slo.e2el_ms, e2el_ns(req)), (slo.tpot_ms, tpot_ns(req)))
    for limit, value in checks:
        if limit is not None and value is not None and value / NS_PER_MS > limit:
            return False
    return True


def compute_metrics(run: RunRecord, slo: SLO | None = None) -> dict[str, Any]:
    """The metric set of DESIGN.md for one measured phase (warm-up excluded)."""
    measured = [r for r in run.requests if not r.warmup]
    ok = [r for r in measured if r.ok]
    duration_ns = max(run.end_ns - run.start_ns, 1)
    duration_s = duration_ns / 1e9

    samples = group_samples(run.requests)
    chunk_sizes = [n for r in ok for n in r.chunk_tokens if n > 0]

    total_out = sum(r.output_tokens for r in ok)
    per_user = [1000.0 / t for t in samples["tpot_ms"] if t > 0]
    good = [r for r in measured if meets_slo(r, slo)] if slo else None

    return {
        **{group: latency_group(values) for group, values in samples.items()},
        "ci": throughput_intervals(run.requests, duration_s),
        "output_tokens_per_s": total_out / duration_s,
        "requests_per_s": len(ok) / duration_s,
        "tokens_per_s_per_user": float(np.mean(per_user)) if per_user else None,
        "goodput_requests_per_s": None if good is None else len(good) / duration_s,
        "goodput_fraction": (len(good) / len(measured)) if good is not None and measured else None,
        "error_rate": ((len(measured) - len(ok)) / len(measured)) if measured else None,
        "mean_tokens_per_chunk": float(np.mean(chunk_sizes)) if chunk_sizes else None,
        "completed": len(ok),
        "failed": len(measured) - len(ok),
        "warmup_excluded": len(run.requests) - len(measured),
        "total_output_tokens": total_out,
        "total_prompt_tokens": sum(r.prompt_tokens for r in ok),
        "duration_s": duration_s,
        "slo": None if slo is None else {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2el_ms": slo.e2el_ms},
    }


def request_table(requests: Sequence[RequestRecord]) -> list[dict[str, Any]]:
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
