"""The serving load driver: requests arriving over time against a streaming engine.

Arrival processes follow vLLM's ``bench serve``: Poisson (exponential gaps) at a rate,
gamma gaps with a burstiness (shape; 1 = Poisson, < 1 burstier) at the same mean rate,
a fixed maximum concurrency (everything due at once, at most N in flight), "as fast as
possible", or the static batches of the measurement core. Gaps are seeded.

Each request records when it was due (``arrival_ns``, the scheduled time) and when it
was actually handed to the engine (``send_ns``); the difference is client-side
queueing (waiting for a concurrency slot, or a late event loop), kept apart from TTFT.
The phase reports configured versus achieved rate.

A *streaming backend* (vllm, vllm-server, openai) offers ``run_async(coro)`` (runs a
coroutine on the backend's own event loop) and ``async stream(prompt, params, record)``
(appends each chunk's ``perf_counter_ns`` stamp and token count to the record; sets
``record.error`` or raises on failure). Other backends (transformers) are driven one
request at a time through ``generate``, so their arrivals queue behind each other.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.backends.base import GenerationParams
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
    limit = workload.max_concurrency
    if arrival == "batch":
        limit = None
    if is_streaming(backend):
        result = backend.run_async(
            _drive_async(
                backend,
                prompts,
                offsets,
                limit,
                params,
                state,
                warmup,
                first_index,
                workload.batch_size if arrival == "batch" else None,
            )
        )
    else:
        result = _drive_sync(backend, prompts, offsets, params, state, warmup, first_index)
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
    if state is not None:
        state.requests_done += 1
        state.tokens_done += record.output_tokens


async def _drive_async(
    backend: Any,
    prompts: list[list[int]],
    offsets: np.ndarray,
    limit: int | None,
    params: GenerationParams,
    state: Any | None,
    warmup: bool,
    first_index: int,
    batch_size: int | None,
) -> LoadResult:
    sem = asyncio.Semaphore(limit) if limit else None
    start_ns = time.perf_counter_ns()
    records = [
        RequestRecord(
            index=first_index + i, arrival_ns=start_ns + int(off * 1e9), send_ns=0, prompt_tokens=len(p), warmup=warmup
        )
        for i, (p, off) in enumerate(zip(prompts, offsets, strict=True))
    ]

    async def one(i: int) -> None:
        rec = records[i]
        delay = (rec.arrival_ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        if sem is not None:
            await sem.acquire()
        try:
            rec.send_ns = time.perf_counter_ns()  # streaming backends restamp it as the request goes out
            await backend.stream(prompts[i], params, rec)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 -- a failed request is a record with its reason, never a failed run
            reason = str(exc) if type(exc).__name__ == "RequestFailed" else f"{type(exc).__name__}: {exc}"
            rec.error = rec.error or reason.strip() or type(exc).__name__
        finally:
            if sem is not None:
                sem.release()
        if rec.error is None and rec.output_tokens == 0:
            rec.error = "no tokens returned"
        _done(state, rec)

    if batch_size:  # static batches: each batch due when the previous one has finished
        for b in range(0, len(records), batch_size):
            batch_start = time.perf_counter_ns()
            for r in records[b : b + batch_size]:
                r.arrival_ns = batch_start
            await asyncio.gather(*(one(i) for i in range(b, min(b + batch_size, len(records)))))
    else:
        await asyncio.gather(*(one(i) for i in range(len(records))))
    return LoadResult(records=records, start_ns=start_ns, end_ns=time.perf_counter_ns())


class _RowSink:
    __slots__ = ("record",)

    def __init__(self, record: RequestRecord) -> None:
        self.record = record

    def chunk(self, row: int, t_ns: int, n_tokens: int) -> None:
        self.record.chunk_ns.append(t_ns)
        self.record.chunk_tokens.append(n_tokens)


def _drive_sync(
    backend: Any,
    prompts: list[list[int]],
    offsets: np.ndarray,
    params: GenerationParams,
    state: Any | None,
    warmup: bool,
    first_index: int,
) -> LoadResult:
    """One request at a time through ``generate``: arrivals queue behind the request in flight."""
    start_ns = time.perf_counter_ns()
    records = []
    for i, (p, off) in enumerate(zip(prompts, offsets, strict=True)):
        rec = RequestRecord(
            index=first_index + i, arrival_ns=start_ns + int(off * 1e9), send_ns=0, prompt_tokens=len(p), warmup=warmup
        )
        delay = (rec.arrival_ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        rec.send_ns = backend.generate([p], params, _RowSink(rec))
        if rec.output_tokens == 0:
            rec.error = "no tokens returned"
        records.append(rec)
        _done(state, rec)
    return LoadResult(records=records, start_ns=start_ns, end_ns=time.perf_counter_ns())


def validate_serving(workload: Workload, engine: str) -> None:
    """Raise SpecError for loads an engine cannot drive (pure)."""
    if engine == "transformers" and workload.arrival != "batch" and (workload.max_concurrency or 1) > 1:
        raise SpecError(
            "the transformers engine serves one request at a time under an arrival process; "
            "drop max_concurrency or use a serving engine (vllm, vllm-server, openai)"
        )
