"""The serving load driver: requests arriving over time against a streaming engine.

Arrival processes follow vLLM's ``bench serve``: Poisson (exponential gaps) at a rate,
gamma gaps with a burstiness (shape; 1 = Poisson, < 1 burstier) at the same mean rate,
a fixed maximum concurrency (everything due at once, at most N in flight), "as fast as
possible", or the static batches of the measurement core. Gaps are seeded.

Each request records when it was due (``arrival_ns``, the scheduled time) and when it
was actually handed to the engine (``send_ns``); the difference is client-side
queueing, kept apart from TTFT. One definition for every engine: **queueing is the time
a request waited client-side after the measured phase started (from its due time, for
an arrival process) before it was sent** -- waiting for a concurrency slot, a late event
loop, or, in static batches, the batches before its own (every request of a static run
is due at the phase start, as in the transformers static-batch loop of engine/run/runner.py).
The phase reports configured versus achieved rate.

A *streaming backend* (vllm, vllm-server, openai) offers ``run_async(coro)`` (runs a
coroutine on the backend's own event loop) and ``async stream(prompt, params, record)``
(appends each chunk's ``perf_counter_ns`` stamp and token count to the record). Only a
:class:`~engine.backends.base.RequestError` (connection, HTTP status, timeout, malformed
or cut stream) is one failed request, recorded with its reason while the others go on;
any other exception (the engine died, a bug) cancels the phase and ends the run as
failed. Other backends (transformers) are driven one request at a time through
``generate``, so their arrivals queue behind each other.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.backends.base import GenerationParams, RequestError
from engine.measure.metrics import SLO
from engine.measure.records import RequestRecord
from engine.spec import SpecError, Workload

__all__ = [
    "LoadResult",
    "arrival_offsets_s",
    "is_streaming",
    "make_serving_prompts",
    "prompt_lengths",
    "run_load",
    "slo_of",
]


def slo_of(workload: Workload) -> SLO | None:
    """The workload's goodput SLOs, or None when it sets none."""
    if not workload.has_slo:
        return None
    return SLO(ttft_ms=workload.slo_ttft_ms, tpot_ms=workload.slo_tpot_ms, e2el_ms=workload.slo_e2el_ms)


def arrival_offsets_s(
    n: int, arrival: str, rate: float | None = None, burstiness: float = 1.0, seed: int = 0
) -> np.ndarray:
    """Seconds from the phase start at which each of ``n`` requests is due.

    ``poisson``: exponential gaps with mean 1/rate; ``gamma``: gamma gaps with shape
    ``burstiness`` and scale 1/(rate*burstiness) (same mean, burstier below 1). As in
    vLLM's ``bench serve`` (0.32), request i is due at the sum of the first i+1 gaps,
    rescaled so the last is due at n/rate exactly (the configured mean rate over the
    run, whatever the seed). Other arrivals: everything due at 0.
    """
    if n <= 0:
        return np.zeros(0)
    if arrival not in ("poisson", "gamma"):
        return np.zeros(n)
    if rate is None or rate <= 0 or math.isinf(rate):
        return np.zeros(n)
    shape = 1.0 if arrival == "poisson" else float(burstiness)
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=shape, scale=1.0 / (rate * shape), size=n)
    offsets = np.cumsum(gaps)
    return offsets * ((n / rate) / offsets[-1])


def prompt_lengths(workload: Workload, count: int) -> list[int]:
    """Prompt lengths in tokens: fixed, or drawn (seeded) uniform/normal around ``prompt_tokens``."""
    n = int(workload.prompt_tokens or 1)
    spread = workload.prompt_length_spread
    if workload.prompt_length == "fixed" or spread == 0:
        return [n] * count
    rng = np.random.default_rng(workload.seed + 1)
    if workload.prompt_length == "uniform":
        lo, hi = max(1, round(n * (1 - spread))), max(1, round(n * (1 + spread)))
        return rng.integers(lo, hi + 1, size=count).tolist()
    draws = rng.normal(n, n * spread, size=count)
    return [max(1, round(v)) for v in draws]


def make_serving_prompts(workload: Workload, count: int, tokenizer: Any | None, vocab_size: int) -> list[list[int]]:
    """``count`` prompts as token ids: the workload's prompts, with drawn lengths when asked."""
    from engine.run.prompts import corpus_token_ids, make_prompts

    if workload.prompt_file is not None or workload.prompt_length == "fixed":
        return make_prompts(workload, count, tokenizer, vocab_size)
    lengths = prompt_lengths(workload, count)
    rng = np.random.default_rng(workload.seed)
    if tokenizer is None:
        return [rng.integers(0, vocab_size, size=n).tolist() for n in lengths]
    ids = corpus_token_ids(tokenizer)
    while len(ids) < max(lengths) + 1:
        ids = ids + ids
    return [ids[(s := int(rng.integers(0, len(ids) - n))) : s + n] for n in lengths]


def is_streaming(backend: Any) -> bool:
    """Whether the backend can stream many requests at once (``stream`` + ``run_async``)."""
    return callable(getattr(backend, "stream", None)) and callable(getattr(backend, "run_async", None))


@dataclass
class LoadResult:
    """One driven phase: the records, its bounds and what the load actually was."""

    records: list[RequestRecord]
    start_ns: int
    end_ns: int
    stats: dict[str, Any] = field(default_factory=dict)


def _achieved_rate(records: Sequence[RequestRecord], start_ns: int) -> float | None:
    """Requests sent / time from the phase start to the last send (the scheduled rate's twin)."""
    sends = [r.send_ns for r in records if r.send_ns]
    if not sends or max(sends) <= start_ns:
        return None
    return len(sends) / ((max(sends) - start_ns) / 1e9)


def _peak_concurrency(records: Sequence[RequestRecord]) -> int:
    events = []
    for r in records:
        if not r.send_ns:
            continue
        end = r.chunk_ns[-1] if r.chunk_ns else r.send_ns
        events.append((r.send_ns, 1))
        events.append((max(end, r.send_ns), -1))
    peak = cur = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):
        cur += d
        peak = max(peak, cur)
    return peak


@dataclass
class _Phase:
    """One phase to drive: what is sent, to whom, and where progress goes."""

    backend: Any
    prompts: list[list[int]]
    params: GenerationParams
    state: Any | None
    warmup: bool
    first_index: int

    def records(self, offsets: np.ndarray, start_ns: int) -> list[RequestRecord]:
        """One record per prompt, due at the phase start plus its offset."""
        return [
            RequestRecord(
                index=self.first_index + i,
                arrival_ns=start_ns + int(off * 1e9),
                send_ns=0,
                prompt_tokens=len(p),
                warmup=self.warmup,
            )
            for i, (p, off) in enumerate(zip(self.prompts, offsets, strict=True))
        ]


def run_load(
    backend: Any,
    prompts: list[list[int]],
    workload: Workload,
    params: GenerationParams,
    state: Any | None = None,
    warmup: bool = False,
    first_index: int = 0,
) -> LoadResult:
    """Drive ``prompts`` through ``backend`` with the workload's arrival process.

    Warm-up phases (``warmup=True``) send everything at once (bounded by
    ``max_concurrency``), since their timing is not measured. ``state`` (a
    :class:`~engine.run.runner.ProgressState`) gets ``requests_done``/``tokens_done`` updates.
    """
    n = len(prompts)
    arrival = "max" if warmup else workload.arrival
    offsets = arrival_offsets_s(n, arrival, workload.rate, workload.burstiness, workload.seed)
    limit = None if arrival == "batch" else workload.max_concurrency
    phase = _Phase(backend, prompts, params, state, warmup, first_index)
    if is_streaming(backend):
        batch_size = workload.batch_size if arrival == "batch" else None
        result = backend.run_async(_drive_async(phase, offsets, limit, batch_size))
    else:
        result = _drive_sync(phase, offsets)
    result.stats.update(
        arrival=arrival,
        configured_rate=workload.rate if arrival in ("poisson", "gamma") else None,
        scheduled_rate=(n / offsets[-1]) if n > 0 and offsets[-1] > 0 else None,
        achieved_rate=_achieved_rate(result.records, result.start_ns),
        max_concurrency=limit,
        peak_concurrency=_peak_concurrency(result.records),
        burstiness=workload.burstiness if arrival == "gamma" else None,
    )
    return result


def _done(state: Any | None, record: RequestRecord) -> None:
    if record.error is None and record.output_tokens == 0:
        record.error = "no tokens returned"
    if state is not None:
        state.requests_done += 1
        state.tokens_done += record.output_tokens


async def _send(phase: _Phase, rec: RequestRecord, prompt: list[int], sem: asyncio.Semaphore | None) -> None:
    """One request when it is due: a RequestError is its recorded reason; anything else propagates."""
    delay = (rec.arrival_ns - time.perf_counter_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)
    if sem is not None:
        await sem.acquire()
    try:
        rec.send_ns = time.perf_counter_ns()  # streaming backends restamp it as the request goes out
        await phase.backend.stream(prompt, phase.params, rec)
    except RequestError as exc:  # request-level only; engine death and bugs end the run
        rec.error = rec.error or str(exc).strip() or type(exc).__name__
    finally:
        if sem is not None:
            sem.release()
    _done(phase.state, rec)


async def _all_or_first_error(coros: list[Any]) -> None:
    """Run ``coros`` together; the first exception cancels the rest and is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            for coro in coros:
                group.create_task(coro)
    except BaseExceptionGroup as eg:
        raise eg.exceptions[0] from None


async def _drive_async(phase: _Phase, offsets: np.ndarray, limit: int | None, batch_size: int | None) -> LoadResult:
    sem = asyncio.Semaphore(limit) if limit else None
    start_ns = time.perf_counter_ns()
    records = phase.records(offsets, start_ns)
    prompts = phase.prompts
    # static batches: each batch is sent when the previous one has finished; every request
    # is due at the phase start, so its queueing includes the batches before its own
    size = batch_size or max(len(records), 1)
    for b in range(0, len(records), size):
        batch = range(b, min(b + size, len(records)))
        await _all_or_first_error([_send(phase, records[i], prompts[i], sem) for i in batch])
    return LoadResult(records=records, start_ns=start_ns, end_ns=time.perf_counter_ns())


class _RowSink:
    __slots__ = ("record",)

    def __init__(self, record: RequestRecord) -> None:
        self.record = record

    def chunk(self, row: int, t_ns: int, n_tokens: int) -> None:
        self.record.chunk_ns.append(t_ns)
        self.record.chunk_tokens.append(n_tokens)


def _drive_sync(phase: _Phase, offsets: np.ndarray) -> LoadResult:
    """One request at a time through ``generate``: arrivals queue behind the request in flight."""
    start_ns = time.perf_counter_ns()
    records = phase.records(offsets, start_ns)
    for rec, p in zip(records, phase.prompts, strict=True):
        delay = (rec.arrival_ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        rec.send_ns = phase.backend.generate([p], phase.params, _RowSink(rec))
        _done(phase.state, rec)
    return LoadResult(records=records, start_ns=start_ns, end_ns=time.perf_counter_ns())


def validate_serving(workload: Workload, engine: str) -> None:
    """Raise SpecError for loads an engine cannot drive (pure)."""
    from engine.spec import engines

    serving = engines.get(engine).capabilities.serving  # a serving engine takes many requests at once
    if not serving and workload.arrival != "batch" and (workload.max_concurrency or 1) > 1:
        raise SpecError(
            f"the {engine} engine serves one request at a time under an arrival process; "
            f"drop max_concurrency or use a serving engine ({', '.join(engines.with_capability('serving'))})"
        )
