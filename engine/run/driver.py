"""The load driver: a plan's requests sent to an engine, on the engine's own event loop.

Arrival processes follow vLLM's ``bench serve``: Poisson (exponential gaps) at a rate,
gamma gaps with a burstiness (shape; 1 = Poisson, < 1 burstier) at the same mean rate,
a fixed maximum concurrency (everything due at once, at most N in flight), "as fast as
possible", or static batches of ``batch_size`` (each batch sent when the one before has
finished). Gaps are seeded. A plan whose requests carry due times (a trace) is sent on
that schedule instead.

Each request records when it was due (``arrival_ns``, the scheduled time) and when it
was actually handed to the engine (``send_ns``); the difference is client-side
queueing, kept apart from TTFT. One definition for every engine: **queueing is the time
a request waited client-side after the measured phase started (from its due time, for
an arrival process) before it was sent** -- waiting for a concurrency slot, a late event
loop, or, in static batches, the batches before its own (every request of a static run
is due at the phase start). The phase reports configured versus achieved rate.

**Sessions** (multi-turn): a session's turns are sent in order by one task; each later turn is
due when the reply to the one before has ended plus a think time (exponential, seeded per
session), and its prompt is the conversation so far with the replies the engine actually
returned (:attr:`~engine.run.plan.RequestPlan.chat_ids`). Sessions start by the arrival process
(over sessions) and ``max_concurrency`` bounds the sessions in flight. A turn that fails ends its
session: the later turns are recorded as failed ("not sent: ...").

**Cancellations**: a planned request with ``cancel_after_s`` is cancelled that long after its send
(the engine closes the connection or aborts the request); it is recorded as cancelled, not
failed, and left out of the latency figures.

Every engine is driven the same way (a :class:`engine.backends.base.Sender`: the loaded backend, or client
processes sending for it): the whole phase is one coroutine run on the sender's loop, each request (or static
batch) one ``sender.stream`` call. A :class:`~engine.backends.base.RequestError` (connection, HTTP
status, timeout, malformed or cut stream) is one failed request, recorded with its reason
while the others go on; any other exception (the engine died, a bug) cancels the phase and
ends the run as failed. The in-process transformers engine generates without yielding its
loop, so under an arrival process its requests queue behind the one in flight.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from engine.backends.base import Message, Request, RequestError, Sender
from engine.jsonvalue import JSONObject
from engine.measure.client_lag import ClientSample, LoopMonitor, pause_gc, resume_gc
from engine.measure.metrics import SLO
from engine.measure.records import RequestRecord
from engine.run.plan import ChatIds, PlannedRequest
from engine.spec import Workload

__all__ = ["PhaseResult", "Progress", "arrival_offsets_s", "drive_phase", "slo_of"]


class Progress(Protocol):
    """Where a phase reports requests and tokens done (the runner's ProgressState)."""

    requests_done: int
    tokens_done: int


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


@dataclass
class PhaseResult:
    """One driven phase: the records, its bounds and what the load actually was."""

    records: list[RequestRecord]
    start_ns: int
    end_ns: int
    stats: JSONObject = field(default_factory=dict)
    client: list[ClientSample] = field(default_factory=list)  # the client's own lag and CPU, per process


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

    sender: Sender
    planned: Sequence[PlannedRequest]
    state: Progress | None
    warmup: bool
    first_index: int
    chat_ids: ChatIds | None = None
    think_time_s: float = 0.0
    seed: int = 0

    def records(self, offsets: Sequence[float], start_ns: int) -> list[RequestRecord]:
        """One record per planned request, due at the phase start plus its offset."""
        return [
            RequestRecord(
                index=self.first_index + i,
                arrival_ns=start_ns + int(off * 1e9),
                send_ns=0,
                prompt_tokens=p.prompt_tokens,
                warmup=self.warmup,
                requested_output_tokens=p.output_tokens,
                session=p.session,
                turn=p.turn,
            )
            for i, (p, off) in enumerate(zip(self.planned, offsets, strict=True))
        ]


def _offsets(planned: Sequence[PlannedRequest], workload: Workload, arrival: str) -> np.ndarray:
    """Due times in seconds: the plan's own (a trace), else the arrival process's (over sessions,
    for a plan of sessions: a later turn's due time is set when it becomes due)."""
    if not planned:
        return np.zeros(0)
    if arrival == "trace":
        return np.asarray([p.due_s or 0.0 for p in planned], dtype=float)
    starts = [i for i, p in enumerate(planned) if not p.turn]  # single requests and sessions' first turns
    offsets = np.zeros(len(planned))
    offsets[starts] = arrival_offsets_s(len(starts), arrival, workload.rate, workload.burstiness, workload.seed)
    return offsets


def drive_phase(
    sender: Sender,
    planned: Sequence[PlannedRequest],
    workload: Workload,
    state: Progress | None = None,
    warmup: bool = False,
    first_index: int = 0,
    chat_ids: ChatIds | None = None,
    think_time_s: float = 0.0,
) -> PhaseResult:
    """Drive ``planned`` through ``sender`` with the workload's arrival process (or the plan's schedule).

    Warm-up phases (``warmup=True``) send static batches as the measured phase would, and
    everything else at once (bounded by ``max_concurrency``), since their timing is not measured.
    ``state`` gets ``requests_done``/``tokens_done`` updates. Sessions need ``chat_ids`` (the plan's).
    """
    scheduled = not warmup and any(p.due_s is not None for p in planned)  # a trace: its own due times
    if scheduled:
        arrival = "trace"
    else:
        arrival = "batch" if workload.arrival == "batch" else ("max" if warmup else workload.arrival)
    offsets = _offsets(planned, workload, arrival)
    limit = None if arrival == "batch" else workload.max_concurrency
    phase = _Phase(sender, planned, state, warmup, first_index, chat_ids, think_time_s, workload.seed)
    batch_size = workload.batch_size if arrival == "batch" else None
    result = sender.run(_drive(phase, offsets, limit, batch_size))
    n = len(planned)
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


def _done(state: Progress | None, record: RequestRecord) -> None:
    if record.error is None and record.output_tokens == 0:
        record.error = "no tokens returned"
    if state is not None:
        state.requests_done += 1
        state.tokens_done += record.output_tokens


async def _stream(
    phase: _Phase, batch: Sequence[Request], records: Sequence[RequestRecord], cancel_s: float | None
) -> None:
    """One ``sender.stream`` call: a RequestError is each request's recorded reason; a planned
    cancellation cancels the call ``cancel_s`` after the send; anything else propagates."""
    now = time.perf_counter_ns()
    for rec in records:
        rec.send_ns = now  # engines restamp it as the request goes out
        rec.ready_ns = rec.ready_ns or now
    try:
        if cancel_s is None:
            await phase.sender.stream(batch, records)
        elif await _cancelled_after(phase.sender.stream(batch, records), cancel_s):
            for rec in records:
                rec.cancelled = True
    except RequestError as exc:  # request-level only; engine death and bugs end the run
        for rec in records:
            rec.error = rec.error or str(exc).strip() or type(exc).__name__


async def _cancelled_after(call: Coroutine[object, None, None], seconds: float) -> bool:
    """Await ``call``, cancelling it after ``seconds``; whether it was cancelled (the client closed it)."""
    try:
        async with asyncio.timeout(seconds):
            await call
    except TimeoutError:
        return True
    return False


async def _sleep_until(due_ns: int) -> None:
    """Sleep until ``due_ns``, never before it: a loop whose timers fire early (uvloop counts whole
    milliseconds) sleeps once more, a millisecond longer, instead of spinning."""
    again = 0.0
    while (left := due_ns - time.perf_counter_ns()) > 0:
        await asyncio.sleep(left / 1e9 + again)
        again = 0.001


async def _ready(due_ns: int, sem: asyncio.Semaphore | None) -> int:
    """Wait until a request is due and holds its concurrency slot; the moment it could go out: its due
    time, or when its slot (or, for a static batch, its turn: now) came, whichever is later."""
    turn = time.perf_counter_ns()
    await _sleep_until(due_ns)
    ready = max(due_ns, turn)
    if sem is not None:
        waited = sem.locked()
        await sem.acquire()
        if waited:
            ready = max(ready, time.perf_counter_ns())
    return ready


async def _send(phase: _Phase, indices: range, records: list[RequestRecord], sem: asyncio.Semaphore | None) -> None:
    """One request (or one static batch) when it is due."""
    batch = [records[i] for i in indices]
    ready = await _ready(batch[0].arrival_ns, sem)
    for rec in batch:
        rec.ready_ns = ready
    try:
        cancel_s = phase.planned[indices[0]].cancel_after_s if len(indices) == 1 else None
        await _stream(phase, [phase.planned[i].request for i in indices], batch, cancel_s)
    finally:
        if sem is not None:
            sem.release()
    for rec in batch:
        _done(phase.state, rec)


async def _session(
    phase: _Phase, turns: list[int], records: list[RequestRecord], sem: asyncio.Semaphore | None
) -> None:
    """One session's turns in order, each carrying the conversation so far with the real replies."""
    records[turns[0]].ready_ns = await _ready(records[turns[0]].arrival_ns, sem)  # a slot for the whole session
    rng = np.random.default_rng((phase.seed, phase.planned[turns[0]].session or 0))
    history: list[Message] = []
    try:
        for k, i in enumerate(turns):
            planned, rec = phase.planned[i], records[i]
            request = planned.request
            if k > 0:
                think = float(rng.exponential(phase.think_time_s)) if phase.think_time_s > 0 else 0.0
                if think > 0:
                    await asyncio.sleep(think)
                rec.arrival_ns = rec.ready_ns = time.perf_counter_ns()  # due now: the reply came, the user thought
                messages = [*history, *(request.messages or ())]
                if phase.chat_ids is None:
                    raise RuntimeError("a plan of sessions needs its chat_ids")
                request = replace(request, prompt=phase.chat_ids(messages), messages=tuple(messages))
                rec.prompt_tokens = len(request.prompt)
            await _stream(phase, [request], [rec], planned.cancel_after_s)
            _done(phase.state, rec)
            if rec.error is not None:
                _abandon(phase, turns[k + 1 :], records, f"not sent: turn {k} of this session failed")
                return
            history = [*(request.messages or ()), {"role": "assistant", "content": rec.text or ""}]
    finally:
        if sem is not None:
            sem.release()


def _abandon(phase: _Phase, rest: list[int], records: list[RequestRecord], reason: str) -> None:
    for i in rest:
        records[i].error = reason
        records[i].send_ns = records[i].arrival_ns = time.perf_counter_ns()
        if phase.state is not None:
            phase.state.requests_done += 1


def _sessions(planned: Sequence[PlannedRequest]) -> list[list[int]] | None:
    """Each session's request indices in turn order, or None for a plan without sessions."""
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(planned):
        if p.session is not None:
            groups.setdefault(p.session, []).append(i)
    if not groups:
        return None
    return [sorted(idx, key=lambda i: planned[i].turn or 0) for idx in groups.values()]


async def _all_or_first_error(coros: list[Coroutine[object, None, None]]) -> None:
    """Run ``coros`` together; the first exception cancels the rest and is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            for coro in coros:
                group.create_task(coro)
    except BaseExceptionGroup as eg:
        raise eg.exceptions[0] from None


async def _drive(phase: _Phase, offsets: np.ndarray, limit: int | None, batch_size: int | None) -> PhaseResult:
    # An HTTP client opens the connections a phase whose requests are all due at once will use, before it
    # starts: the first wave then goes out on time instead of behind hundreds of handshakes
    sender = phase.sender
    if not phase.warmup and (limit or batch_size) and not np.any(offsets):
        await sender.open_connections(min(limit or batch_size or 0, len(offsets)))
    monitor = LoopMonitor().start()  # the driver's own loop: how late it ran while it drove the phase
    await sender.client_samples(True)  # client processes (--client-processes) sample their own loops
    # An HTTP client's phase without the cyclic collector (engine.measure.client_lag.pause_gc); an engine in
    # this process (transformers, vLLM) keeps it
    traits = sender.traits()
    paused = pause_gc() if traits.pauses_gc else False
    try:
        result = await _drive_requests(phase, offsets, limit, batch_size)
    finally:
        resume_gc(paused)
        sample = monitor.stop()
        sample.kernel_stamps = traits.kernel_stamps
    result.client = [sample, *(await sender.client_samples(False))]
    return result


async def _drive_requests(phase: _Phase, offsets: np.ndarray, limit: int | None, batch_size: int | None) -> PhaseResult:
    sem = asyncio.Semaphore(limit) if limit else None
    start_ns = time.perf_counter_ns()
    records = phase.records(offsets.tolist(), start_ns)
    n = len(records)
    sessions = _sessions(phase.planned)
    if sessions is not None:  # static batches of sessions: batch_size sessions at a time
        sem = sem or (asyncio.Semaphore(batch_size) if batch_size else None)
        await _all_or_first_error([_session(phase, turns, records, sem) for turns in sessions])
    elif batch_size is not None:  # static batches: each sent when the previous one has finished
        for b in range(0, n, batch_size):
            await _send(phase, range(b, min(b + batch_size, n)), records, None)
    else:
        await _all_or_first_error([_send(phase, range(i, i + 1), records, sem) for i in range(n)])
    return PhaseResult(records=records, start_ns=start_ns, end_ns=time.perf_counter_ns())
