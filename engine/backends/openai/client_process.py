"""One client process of ``--client-processes``: ``python -m engine.backends.openai.client_process FD``.

It is an :class:`~engine.backends.openai.backend.OpenAIBackend` with its own event loop (uvloop where
installed), set up from the settings the driver's process sends first (server, model, endpoint, the
API key's variable name, where the tokenizer's files are), then serving the driver's messages on the
socket ``FD``: ``stream`` (send these requests now; answer with the filled records), ``cancel`` (the
driver cancelled that call: the connection closes, the partial record goes back), ``sample`` (start,
or stop and return, the loop-lag and CPU sample of a phase), ``open`` (open a phase's share of the
connections before it starts), ``clock`` (this host's ``perf_counter_ns``
now: the driver estimates a remote node's clock offset from a few round trips) and ``stop``. It never
decides when a request goes out: the driver's one scheduler does
(:mod:`engine.backends.openai.process_pool`). It ends when the driver's process ends (its socket
closes; PR_SET_PDEATHSIG besides).

On another node (``--load-nodes``, engine/jobs/ray_load.py) the same loop serves a TCP connection
instead (:func:`serve_socket`); its settings then carry the API key itself and the tokenizer's files
(``inline``), since that node has neither the job's environment nor its model folder.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
import traceback

from engine.backends.openai import channel
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.client_settings import api_key, tokenizer_of
from engine.backends.openai.sse import RequestFailed
from engine.jsonvalue import JSONObject, JSONValue
from engine.measure.client_lag import LoopMonitor, pause_gc, resume_gc
from engine.measure.records import RequestRecord
from engine.secrets import scrub


def client_from_settings(settings: JSONObject) -> OpenAIBackend:
    """An OpenAI client configured as the driver's (:meth:`OpenAIBackend.client_settings`), with its tokenizer."""
    key = api_key(settings.get("api_key_env"), settings.get("api_key"), required=False)
    client = OpenAIBackend()
    client.configure(
        settings["base_url"],
        settings["model_name"],
        settings["endpoint"],
        key,
        settings["send_ignore_eos"],
        settings["timeout_s"],
        api_key_env=settings.get("api_key_env"),
    )
    client.use_tokenizer(tokenizer_of(settings.get("tokenizer"), key, client.server_root, settings["model_name"]))
    return client


class _Serving:
    """The driver's messages, each ``stream`` its own task."""

    def __init__(self, client: OpenAIBackend, writer: asyncio.StreamWriter) -> None:
        self.client = client
        self.writer = writer
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.monitor: LoopMonitor | None = None
        self.gc_paused = False

    def handle(self, message: JSONObject) -> bool:
        """One message; False on ``stop``."""
        op, ident = message.get("op"), message.get("id")
        if op == "stop":
            return False
        if op in ("stream", "open"):  # answered when done; meanwhile the next messages are read
            work = self._stream(ident, message) if op == "stream" else self._open(ident, int(message.get("n") or 0))
            self.tasks[ident] = asyncio.get_running_loop().create_task(work)
        elif op == "cancel" and (task := self.tasks.get(ident)) is not None:
            task.cancel()
        elif op == "sample":
            self._sample(ident, bool(message.get("start")))
        elif op == "clock":
            channel.write(self.writer, {"id": ident, "now": time.perf_counter_ns()})
        return True

    async def _open(self, ident: int, n: int) -> None:
        """Open this process's share of a phase's connections before it starts (OpenAIBackend.open_connections)."""
        try:
            await self.client.open_connections(n)
        finally:
            self.tasks.pop(ident, None)
            channel.write(self.writer, {"id": ident})

    def _sample(self, ident: int, start: bool) -> None:
        """A phase starts (the loop sampled, the cyclic collector paused) or ends (its sample sent back)."""
        if start:
            self.monitor = LoopMonitor(role="sender", whole_process=True).start()
            self.gc_paused = pause_gc()
            channel.write(self.writer, {"id": ident})
            return
        resume_gc(self.gc_paused)
        self.gc_paused = False
        stopped = self.monitor.stop() if self.monitor is not None else None
        if stopped is not None:
            stopped.kernel_stamps = self.client.traits().kernel_stamps
        sample = stopped.to_json() if stopped is not None else None
        self.monitor = None
        channel.write(self.writer, {"id": ident, "sample": sample})

    async def _stream(self, ident: int, message: JSONObject) -> None:
        requests = [channel.request_of(r) for r in message["requests"]]
        records = [RequestRecord(index=0, arrival_ns=0, send_ns=0, prompt_tokens=n) for n in message["prompt_tokens"]]
        reply: JSONObject = {"id": ident}
        try:
            await self.client.stream(requests, records)
        except RequestFailed as exc:
            reply["failed"] = str(exc)
        except asyncio.CancelledError:
            reply["cancelled"] = True  # the partial records go back: the driver keeps what had arrived
        except Exception:  # noqa: BLE001 - anything else ends the run: the driver raises it with this text
            reply["crash"] = scrub(traceback.format_exc(limit=8))
        finally:
            self.tasks.pop(ident, None)
        reply["records"] = [channel.record_json(r) for r in records]
        channel.write(self.writer, reply)


async def serve(sock: socket.socket, client: OpenAIBackend, ident: JSONValue, facts: JSONObject | None = None) -> None:
    """Say ready (with ``facts``: where this process runs), then serve the driver's messages until
    ``stop`` or the driver goes."""
    from engine.backends.asyncloop import loop_kind

    reader, writer = await asyncio.open_connection(sock=sock)
    ready = {"id": ident, "pid": os.getpid(), "event_loop": loop_kind(asyncio.get_running_loop())}
    channel.write(writer, {**ready, **({"node": facts} if facts else {})})
    serving = _Serving(client, writer)
    try:
        while True:
            try:
                message = await channel.read(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return  # the driver is gone
            if not serving.handle(message):
                return
    finally:
        for task in list(serving.tasks.values()):
            task.cancel()


def _read_setup(sock: socket.socket) -> JSONObject:
    """The first message, read before any event loop exists (it says how to build the client)."""
    head = channel.recv_exactly(sock, 4)
    return channel.decode(channel.recv_exactly(sock, int.from_bytes(head, "big")))


def main(argv: list[str]) -> int:
    """Run one client process on the inherited socket ``argv[0]`` (a file descriptor)."""
    return serve_socket(socket.socket(fileno=int(argv[0])))


def serve_socket(sock: socket.socket, facts: JSONObject | None = None) -> int:
    """Read the settings from ``sock``, build the client, serve the driver until it stops; 0, or 1
    when the client could not be built (said to the driver)."""
    setup = _read_setup(sock)
    try:
        client = client_from_settings(setup["settings"])
    except Exception as exc:  # noqa: BLE001 - said to the driver in one line, which fails the run with it
        sock.sendall(channel.encode({"id": setup.get("id"), "error": scrub(f"{type(exc).__name__}: {exc}")}))
        return 1
    try:
        client.run(serve(sock, client, setup.get("id"), facts))
    finally:
        client.unload()
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
