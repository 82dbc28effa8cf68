"""Per-request figures from raw stamps (TTFT, TPOT, E2EL, ITL gaps, queueing) and the measured phase.

The definitions are DESIGN.md's "Metrics" (see :mod:`engine.measure.metrics` for the whole
set). :class:`Phase` is what every metric declaration (:mod:`engine.measure.declarations`)
computes from: the phase's requests, its duration and its SLO, with the measured and the
successful requests and each latency group's samples worked out once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from engine.measure.records import RequestRecord

NS_PER_MS = 1_000_000
MIN_THROUGHPUT_REQUESTS = 6  # as for a p50: fewer requests give no throughput interval


@dataclass(frozen=True)
class SLO:
    """Service-level objectives in ms; ``None`` means no limit on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None


def _token_chunks(req: RequestRecord) -> list[int]:
    return [t for t, n in zip(req.chunk_ns, req.chunk_tokens, strict=True) if n > 0]


def ttft_ns(req: RequestRecord) -> int | None:
    """First token-bearing chunk minus send; None without one."""
    stamps = _token_chunks(req)
    return stamps[0] - req.send_ns if stamps else None


def e2el_ns(req: RequestRecord) -> int | None:
    """Last token-bearing chunk minus send; None without one."""
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
    """Every gap between consecutive token-bearing chunks of one request."""
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


def measured_requests(requests: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The requests every figure counts: warm-up excluded, and those the client cancelled on purpose
    (``workload.cancel_rate``: counted apart, neither completed nor failed)."""
    return [r for r in requests if not r.warmup and not r.cancelled]


def from_due_ns(req: RequestRecord, last: bool = False) -> int | None:
    """First (``last``: last) token-bearing chunk minus the request's due time; None without one."""
    stamps = _token_chunks(req)
    return (stamps[-1] if last else stamps[0]) - req.arrival_ns if stamps else None


def group_samples(requests: Sequence[RequestRecord], due_times: bool = False) -> dict[str, list[float]]:
    """Each latency group's samples in ms (measured requests; successful ones but for queueing).

    ``due_times``: the requests had due times of their own (an open arrival process, a trace), so
    latency is also kept from the due time (coordinated omission: a late send hides nothing)."""
    measured = measured_requests(requests)
    ok = [r for r in measured if r.ok]
    due_ok = ok if due_times else []
    return {
        "ttft_from_due_ms": [v / NS_PER_MS for r in due_ok if (v := from_due_ns(r)) is not None],
        "e2el_from_due_ms": [v / NS_PER_MS for r in due_ok if (v := from_due_ns(r, last=True)) is not None],
        "ttft_ms": [v / NS_PER_MS for r in ok if (v := ttft_ns(r)) is not None],
        "tpot_ms": [v / NS_PER_MS for r in ok if (v := tpot_ns(r)) is not None],
        "itl_ms": [g / NS_PER_MS for r in ok for g in itl_gaps_ns(r)],
        "e2el_ms": [v / NS_PER_MS for r in ok if (v := e2el_ns(r)) is not None],
        "queue_ms": [(r.send_ns - r.arrival_ns) / NS_PER_MS for r in measured],
    }


def throughput_rows(requests: Sequence[RequestRecord], duration_s: float) -> dict[str, np.ndarray] | None:
    """Per measured request: ``(output tokens, duration share)`` and ``(completed 0/1, duration share)``.

    A request's share is its send-to-last-token span scaled so all shares sum to ``duration_s``;
    summed tokens over summed shares is exactly the run's output tokens/s. None when there are
    fewer than MIN_THROUGHPUT_REQUESTS measured requests or no span at all.
    """
    measured = measured_requests(requests)
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


class Phase:
    """One measured phase as the metric declarations see it: its requests (warm-up included, left
    out of every figure), its duration in seconds and its SLO (None: none set)."""

    def __init__(
        self, requests: Sequence[RequestRecord], duration_s: float, slo: SLO | None = None, due_times: bool = False
    ) -> None:
        self.requests = list(requests)
        self.duration_s = duration_s
        self.slo = slo
        self.due_times = due_times

    @cached_property
    def measured(self) -> list[RequestRecord]:
        """The measured requests (warm-up excluded)."""
        return measured_requests(self.requests)

    @cached_property
    def ok(self) -> list[RequestRecord]:
        """The measured requests that succeeded."""
        return [r for r in self.measured if r.ok]

    @cached_property
    def samples(self) -> dict[str, list[float]]:
        """Each latency group's samples in ms (:func:`group_samples`)."""
        return group_samples(self.requests, self.due_times)

    @cached_property
    def throughput(self) -> dict[str, np.ndarray]:
        """:func:`throughput_rows` of the phase (empty when there are too few requests)."""
        return throughput_rows(self.requests, self.duration_s) or {}

    @cached_property
    def good(self) -> list[RequestRecord] | None:
        """The measured requests that met every SLO; None when no SLO is set."""
        return None if self.slo is None else [r for r in self.measured if meets_slo(r, self.slo)]


def cached_share(requests: Sequence[RequestRecord]) -> float | None:
    """The share of prompt tokens the engine served from its prefix cache, over the requests whose
    engine said (vLLM: in process, or its server with ``--enable-prompt-tokens-details``); None when none did."""
    told = [r for r in requests if r.cached_prompt_tokens is not None]
    total = sum(r.prompt_tokens for r in told)
    return sum(r.cached_prompt_tokens or 0 for r in told) / total if told and total else None
