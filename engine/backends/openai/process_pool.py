"""Several client processes for one OpenAI client: every core sends, one scheduler decides when.

:class:`ClientProcesses` is a :class:`~engine.backends.base.SenderPool` for the load driver
(:mod:`engine.run.driver`), which stays the one scheduler: its arrival process, due times,
concurrency limit and sessions run in the job's process exactly as with one client, and each
``stream`` call (one request, or a static batch) is handed to a client process
(:mod:`engine.backends.openai.client_process`), each with its own event loop, which sends it,
stamps every network read and parses the events, and sends the filled record back. The driver
copies it into its own record, so the run is stored exactly as one process would store it.

Where a request goes: a session's turns to the process of its first turn (a session stays in
one process); anything else to the process with the fewest requests in flight; a static batch
is split over the processes. A concurrency slot is freed when the record is back, after the
last byte arrived, so the limit holds across processes. Stamps are ``perf_counter_ns``
(CLOCK_MONOTONIC, one clock for every process of a host). The send stamp is the client
process's own; the hand-over (a few tens of microseconds) is client-side queueing, never TTFT.
A cancelled call (a planned cancellation) closes that request's connection in its process and
brings back what had arrived. A client process that dies fails the run with its last words.

Where the processes run is the launcher's: :class:`~engine.backends.openai.launchers.LocalLauncher` starts them on this host (a socket
pair each); ``RayLauncher`` (engine/jobs/ray_load.py, ``--load-nodes K``) starts them as Ray actors
on K nodes, which connect back over TCP. A remote process's clock is not this host's: its offset is
estimated from a few timed round trips (the one with the shortest round trip wins) and its stamps are
moved by it, so the time series line up; durations within a record (TTFT, ITL, TPOT) are one host's
and unchanged. Offsets and round trips are recorded in :meth:`ClientProcesses.info`.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, TypeVar

from engine.backends.base import BackendError, ClientTraits, Handle, Launcher, Progress, Request, SenderPool
from engine.backends.openai import channel
from engine.backends.openai.launchers import LocalLauncher
from engine.backends.openai.sse import RequestFailed
from engine.jsonvalue import JSONObject
from engine.measure.client_lag import ClientSample
from engine.measure.records import RequestRecord

if TYPE_CHECKING:
    from engine.backends.openai.backend import OpenAIBackend

T = TypeVar("T")
START_TIMEOUT_S = 60.0
CANCEL_WAIT_S = 10.0


CLOCK_ROUNDS = 7  # timed round trips to a remote process; the shortest gives its clock offset


class _Process:
    """One client process: its handle, its socket streams, the calls in flight, its clock offset."""

    def __init__(self, index: int, sock: socket.socket, handle: Handle) -> None:
        self.index = index
        self.handle = handle
        self.sock = sock
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.pending: dict[int, asyncio.Future[JSONObject]] = {}
        self.in_flight = 0
        self.sent = 0
        self.dead: str | None = None
        self.pid = handle.pid
        self.event_loop = ""
        self.node: JSONObject = {}  # where a remote process runs (its node id, address, host)
        self.clock_offset_ns = 0  # its perf_counter_ns minus ours (0 on this host)
        self.rtt_ns: int | None = None

    def last_words(self) -> str:
        return self.handle.last_words()


class ClientProcesses(SenderPool):
    """``n`` client processes sending for one OpenAI client (a :class:`~engine.backends.base.SenderPool`, not a
    backend: it loads nothing); the wrapped backend keeps everything else (loop, tokenizer, counters)."""

    def __init__(self, backend: OpenAIBackend, n: int, launcher: Launcher | None = None) -> None:
        self.name = backend.name
        self._backend = backend
        self._n = n
        self._launcher: Launcher = launcher or LocalLauncher()
        self._procs: list[_Process] = []
        self._ids = itertools.count(1)
        self._rr = itertools.count()
        self._sessions: dict[int, int] = {}
        self.placements: dict[int, int] = {}  # record index -> the process that sent it
        self._reading: list[asyncio.Task[None]] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, progress: Progress) -> ClientProcesses:
        """Start the processes and wait until each is ready (its client set up); BackendError otherwise."""
        progress(f"starting {self._n} client processes", None)
        try:
            launched = self._launcher.launch(self._n, progress)
            self._procs = [_Process(i, sock, handle) for i, (sock, handle) in enumerate(launched)]
            remote = self._launcher.remote
            settings = self._backend.remote_client_settings() if remote else self._backend.client_settings()
            self._backend.run(self._connect_all(settings))
        except BaseException:
            self.close()
            raise
        return self

    async def _connect_all(self, settings: JSONObject) -> None:
        async with asyncio.timeout(START_TIMEOUT_S):
            await asyncio.gather(*(self._connect(p, settings) for p in self._procs))

    async def _connect(self, p: _Process, settings: JSONObject) -> None:
        p.reader, p.writer = await asyncio.open_connection(sock=p.sock)
        channel.write(p.writer, {"op": "setup", "id": 0, "settings": settings})
        try:
            ready = await channel.read(p.reader)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise BackendError(f"client process {p.index} exited while starting: {p.last_words() or exc}") from exc
        if ready.get("error"):
            raise BackendError(f"client process {p.index} could not set up its client: {ready['error']}")
        p.pid, p.event_loop = int(ready.get("pid") or p.pid), str(ready.get("event_loop") or "")
        p.node = dict(ready.get("node") or {})
        self._reading.append(asyncio.get_running_loop().create_task(self._read(p)))
        if self._launcher.remote:
            await self._clock(p)

    async def _clock(self, p: _Process) -> None:
        """``p``'s clock offset: of :data:`CLOCK_ROUNDS` round trips, the shortest's midpoint against its stamp."""
        best: tuple[int, int] | None = None
        for _ in range(CLOCK_ROUNDS):
            t0 = time.perf_counter_ns()
            reply = await self._ask(p, {"op": "clock"})
            t1 = time.perf_counter_ns()
            sample = (t1 - t0, int(reply["now"]) - (t0 + t1) // 2)
            best = sample if best is None or sample[0] < best[0] else best
        assert best is not None
        p.rtt_ns, p.clock_offset_ns = best

    async def _read(self, p: _Process) -> None:
        assert p.reader is not None
        try:
            while True:
                message = await channel.read(p.reader)
                fut = p.pending.pop(int(message.get("id") or 0), None)
                if fut is not None and not fut.done():
                    fut.set_result(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            code = p.handle.exit_code()
            p.dead = f"client process {p.index} (pid {p.pid}) exited{f' with code {code}' if code else ''}"
            p.dead += f": {p.last_words()}" if p.last_words() else ""
            for fut in p.pending.values():
                if not fut.done():
                    fut.set_exception(BackendError(p.dead))
            p.pending.clear()

    def close(self) -> None:
        """Stop every process (``stop``, then SIGTERM, then SIGKILL; a Ray actor is killed) and its launcher."""
        procs, self._procs = self._procs, []
        if procs:
            try:
                self._backend.run(self._stop(procs))
            except (RuntimeError, OSError, TimeoutError):  # the loop is closed already: signals do it
                pass
        for p in procs:
            p.handle.stop()
            p.sock.close()
        self._launcher.close()

    async def _stop(self, procs: list[_Process]) -> None:
        for task in self._reading:
            task.cancel()
        self._reading.clear()
        for p in procs:
            if p.writer is not None and not p.writer.is_closing():
                channel.write(p.writer, {"op": "stop", "id": 0})
                async with asyncio.timeout(5.0):
                    await p.writer.drain()
                p.writer.close()

    # -- the Backend the load driver drives --------------------------------------------------------
    def run(self, coro: Coroutine[object, None, T]) -> T:
        """Run ``coro`` on the wrapped backend's loop (where the processes' sockets live)."""
        return self._backend.run(coro)

    async def stream(self, batch: Sequence[Request], records: Sequence[RequestRecord]) -> None:
        """One request to one process (RequestFailed for it), or a static batch split over the processes."""
        if len(batch) == 1:
            await self._call(self._pick(records[0]), batch, records)
            return
        parts = _split(len(batch), min(len(self._procs), len(batch)))
        order = sorted(self._procs, key=lambda p: p.in_flight)
        outcomes = await asyncio.gather(
            *(self._call(p, batch[a:b], records[a:b]) for p, (a, b) in zip(order, parts, strict=False)),
            return_exceptions=True,
        )
        for (a, b), out in zip(parts, outcomes, strict=True):
            if isinstance(out, RequestFailed):
                for rec in records[a:b]:
                    rec.error = rec.error or str(out)
            elif isinstance(out, BaseException):
                raise out

    def _pick(self, record: RequestRecord) -> _Process:
        """A session's own process, else the one with the fewest requests in flight."""
        if record.session is not None and record.session in self._sessions:
            chosen = self._procs[self._sessions[record.session]]
        else:
            start = next(self._rr) % len(self._procs)
            ring = self._procs[start:] + self._procs[:start]
            chosen = min(ring, key=lambda p: p.in_flight)
            if record.session is not None:
                self._sessions[record.session] = chosen.index
        self.placements[record.index] = chosen.index
        return chosen

    async def _call(self, p: _Process, batch: Sequence[Request], records: Sequence[RequestRecord]) -> None:
        if p.dead:
            raise BackendError(p.dead)
        assert p.writer is not None
        ident = next(self._ids)
        fut: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        p.pending[ident] = fut
        p.in_flight += len(batch)
        p.sent += len(batch)
        message = {
            "op": "stream",
            "id": ident,
            "requests": [channel.request_json(r) for r in batch],
            "prompt_tokens": [r.prompt_tokens for r in records],
        }
        channel.write(p.writer, message)
        try:
            try:
                reply = await asyncio.shield(fut)  # shielded: a cancellation leaves the reply to come
            except asyncio.CancelledError:  # a planned cancellation: the process closes it, sends what arrived
                channel.write(p.writer, {"op": "cancel", "id": ident})
                try:
                    reply = await asyncio.wait_for(fut, CANCEL_WAIT_S)
                except (TimeoutError, BackendError):
                    raise asyncio.CancelledError from None
                for rec, data in zip(records, reply.get("records") or [], strict=False):
                    channel.fill_record(rec, data, p.clock_offset_ns)
                raise
        finally:
            p.in_flight -= len(batch)
            p.pending.pop(ident, None)
        for rec, data in zip(records, reply.get("records") or [], strict=False):
            channel.fill_record(rec, data, p.clock_offset_ns)
        if reply.get("crash"):
            raise BackendError(f"client process {p.index} failed: {reply['crash'].strip().splitlines()[-1]}")
        if reply.get("failed"):
            raise RequestFailed(reply["failed"])

    async def open_connections(self, n: int) -> None:
        """Each process opens its share of ``n`` connections before a phase whose requests are all due at once
        (requests go to the least busy process, so each holds about ``n`` over the processes)."""
        share = -(-n // max(len(self._procs), 1))
        await asyncio.gather(*(self._ask(p, {"op": "open", "n": share}) for p in self._procs))

    async def client_samples(self, start: bool) -> list[ClientSample]:
        """Start each process's loop-lag and CPU sample of a phase, or stop them and return them."""
        replies = await asyncio.gather(*(self._ask(p, {"op": "sample", "start": start}) for p in self._procs))
        return [ClientSample.from_json(r["sample"]) for r in replies if not start and r.get("sample")]

    async def _ask(self, p: _Process, message: JSONObject) -> JSONObject:
        if p.dead:
            raise BackendError(p.dead)
        assert p.writer is not None
        ident = next(self._ids)
        fut: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        p.pending[ident] = fut
        channel.write(p.writer, {**message, "id": ident})
        return await fut

    # -- what they said about themselves ---------------------------------------------------------
    def info(self) -> JSONObject:
        """The processes, their loops and how many requests each sent (and, on other nodes, each node's
        processes, requests, clock offsets and round trips)."""
        out: JSONObject = {
            "processes": len(self._procs) or self._n,
            "pids": [p.pid for p in self._procs],
            "event_loops": sorted({p.event_loop for p in self._procs if p.event_loop}),
            "requests": [p.sent for p in self._procs],
        }
        if self._launcher.remote:
            nodes: dict[str, JSONObject] = {}
            for p in self._procs:
                key = str(p.node.get("node_id") or p.node.get("node_ip") or "?")
                blank = {"processes": 0, "requests": 0, "clock_offsets_ns": [], "rtt_us": []}
                node = nodes.setdefault(key, {**p.node, **blank})
                node["processes"] += 1
                node["requests"] += p.sent
                node["clock_offsets_ns"].append(p.clock_offset_ns)
                node["rtt_us"].append(round((p.rtt_ns or 0) / 1000, 1))
            out["nodes"] = list(nodes.values())
        return out

    def traits(self) -> ClientTraits:
        """The wrapped client's: the driver's process pauses its collector for a phase, each process its own."""
        return self._backend.traits()


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``n`` items in ``parts`` contiguous slices as even as can be."""
    base, extra = divmod(n, parts)
    bounds, start = [], 0
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds
