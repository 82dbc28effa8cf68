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
    """The stamps of the token-bearing chunks (the record's own list when every chunk bears tokens)."""
    tokens = req.chunk_tokens
    if len(tokens) == len(req.chunk_ns) and (not tokens or min(tokens) > 0):
        return req.chunk_ns  # the common case, checked in C: no copy, no Python loop
    return [t for t, n in zip(req.chunk_ns, tokens, strict=True) if n > 0]


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


@dataclass(frozen=True)
class _Walk:
    """One pass over a phase's measured requests: what every per-request figure is made of.

    ``first``/``last``: the first and last token-bearing stamps minus the send (None without one);
    ``n_out``: output tokens; ``flat``/``ends``: the successful requests' token stamps end to end."""

    measured: list[RequestRecord]
    first: list[int | None]
    last: list[int | None]
    n_out: list[int]
    flat: list[int]
    ends: list[int]


def _walk(requests: Sequence[RequestRecord]) -> _Walk:
    measured = measured_requests(requests)
    walk = _Walk(measured, [], [], [], [], [])
    for r in measured:
        stamps = _token_chunks(r)
        walk.n_out.append(sum(r.chunk_tokens))
        if not stamps:
            walk.first.append(None)
            walk.last.append(None)
            continue
        walk.first.append(stamps[0] - r.send_ns)
        walk.last.append(stamps[-1] - r.send_ns)
        if r.ok:
            walk.flat.extend(stamps)
            walk.ends.append(len(walk.flat))
    return walk


def _tpot(first: int | None, last: int | None, n_out: int) -> float | None:
    return None if n_out <= 1 or first is None or last is None else (last - first) / (n_out - 1)


def _samples(walk: _Walk, due_times: bool = False) -> dict[str, list[float]]:
    ttft: list[float] = []
    tpot: list[float] = []
    e2el: list[float] = []
    late: list[float] = []  # send minus due, of the successful requests (latency from the due time adds it)
    for r, first, last, n_out in zip(walk.measured, walk.first, walk.last, walk.n_out, strict=True):
        if not r.ok or first is None or last is None:
            continue
        ttft.append(first / NS_PER_MS)
        e2el.append(last / NS_PER_MS)
        late.append((r.send_ns - r.arrival_ns) / NS_PER_MS)
        if (v := _tpot(first, last, n_out)) is not None:
            tpot.append(v / NS_PER_MS)
    return {  # latency from the due time: only where requests had due times of their own (else empty)
        "ttft_from_due_ms": [t + d for t, d in zip(ttft, late, strict=True)] if due_times else [],
        "e2el_from_due_ms": [e + d for e, d in zip(e2el, late, strict=True)] if due_times else [],
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        "itl_ms": _pooled_gaps_ms(walk.flat, walk.ends),
        "e2el_ms": e2el,
        "queue_ms": [(r.send_ns - r.arrival_ns) / NS_PER_MS for r in walk.measured],
    }


def group_samples(requests: Sequence[RequestRecord], due_times: bool = False) -> dict[str, list[float]]:
    """Each latency group's samples in ms (measured requests; successful ones but for queueing).

    One pass over the requests; the ITL gaps of every request are taken at once with numpy
    (integer differences, then the same division by NS_PER_MS as one request at a time).
    ``due_times``: the requests had due times of their own (an open arrival process, a trace), so
    latency is also kept from the due time (coordinated omission: a late send hides nothing)."""
    return _samples(_walk(requests), due_times)


def _pooled_gaps_ms(flat: list[int], ends: list[int]) -> list[float]:
    """Every gap between consecutive stamps of one request, request after request, in ms."""
    if len(flat) < 2:
        return []
    gaps = np.diff(np.asarray(flat, dtype=np.int64))
    keep = np.ones(gaps.size, dtype=bool)
    keep[np.asarray(ends[:-1], dtype=np.int64) - 1] = False  # the step from one request's last stamp to the next's
    return (gaps[keep] / NS_PER_MS).tolist()


def _throughput(walk: _Walk, duration_s: float) -> dict[str, np.ndarray] | None:
    measured = walk.measured
    spans = np.asarray([max(last or 0, 0) for last in walk.last], dtype=float)
    if len(measured) < MIN_THROUGHPUT_REQUESTS or spans.sum() <= 0 or duration_s <= 0:
        return None
    shares = spans * duration_s / spans.sum()
    tokens = [n if r.ok else 0 for r, n in zip(measured, walk.n_out, strict=True)]
    done = [1.0 if r.ok else 0.0 for r in measured]
    return {"output_tokens_per_s": np.c_[tokens, shares], "requests_per_s": np.c_[done, shares]}


def throughput_rows(requests: Sequence[RequestRecord], duration_s: float) -> dict[str, np.ndarray] | None:
    """Per measured request: ``(output tokens, duration share)`` and ``(completed 0/1, duration share)``.

    A request's share is its send-to-last-token span scaled so all shares sum to ``duration_s``;
    summed tokens over summed shares is exactly the run's output tokens/s. None when there are
    fewer than MIN_THROUGHPUT_REQUESTS measured requests or no span at all.
    """
    return _throughput(_walk(requests), duration_s)


def _per_user(walk: _Walk) -> list[float]:
    out = []
    for r, first, last, n_out in zip(walk.measured, walk.first, walk.last, walk.n_out, strict=True):
        if r.ok and (v := _tpot(first, last, n_out)) is not None and v > 0:
            out.append(1e9 / v)
    return out


def per_user_samples(requests: Sequence[RequestRecord]) -> list[float]:
    """Each successful measured request's tokens/s per user, 1000 / TPOT [ms]."""
    return _per_user(_walk(requests))


def _bearing(tokens: list[int]) -> int:
    """How many chunks bear tokens (all of them, checked in C, in the common case)."""
    return len(tokens) if min(tokens, default=1) > 0 else sum(1 for n in tokens if n > 0)


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
        """The measured requests (warm-up and cancelled ones excluded: :func:`measured_requests`)."""
        return self._walk.measured

    @cached_property
    def ok(self) -> list[RequestRecord]:
        """The measured requests that succeeded."""
        return [r for r in self.measured if r.ok]

    @cached_property
    def _walk(self) -> _Walk:
        return _walk(self.requests)

    @cached_property
    def samples(self) -> dict[str, list[float]]:
        """Each latency group's samples in ms (:func:`group_samples`)."""
        return _samples(self._walk, self.due_times)

    @cached_property
    def throughput(self) -> dict[str, np.ndarray]:
        """:func:`throughput_rows` of the phase (empty when there are too few requests)."""
        return _throughput(self._walk, self.duration_s) or {}

    @cached_property
    def per_user(self) -> list[float]:
        """:func:`per_user_samples` of the phase."""
        return _per_user(self._walk)

    @cached_property
    def output_tokens(self) -> int:
        """Output tokens of the successful measured requests."""
        return sum(n for r, n in zip(self._walk.measured, self._walk.n_out, strict=True) if r.ok)

    @cached_property
    def token_chunks(self) -> tuple[int, int]:
        """(tokens, token-bearing chunks) of the successful measured requests."""
        return self.output_tokens, sum(_bearing(r.chunk_tokens) for r in self._walk.measured if r.ok)

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
