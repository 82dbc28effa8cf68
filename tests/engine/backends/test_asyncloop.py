"""The one event loop of a streaming backend: runs, catches up after idling, closes cleanly."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from engine.backends.asyncloop import EventLoop
from engine.backends.base import Request
from engine.backends.openai.backend import OpenAIBackend
from engine.measure.records import RequestRecord

_SSE = b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[],"usage":{"completion_tokens":1}}\n\ndata: [DONE]\n\n'


@pytest.fixture()
def keepalive_server() -> Iterator[str]:
    """An aiohttp server that closes idle keep-alive connections after 0.3 s (uvicorn: 5 s)."""
    from aiohttp import web

    async def completions(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_SSE)
        await resp.write_eof()
        return resp

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app, keepalive_timeout=0.3)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v1"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_a_connection_the_server_closed_while_idle_is_not_reused(keepalive_server: str) -> None:
    backend = OpenAIBackend()
    backend.configure(keepalive_server, "x", "completions", None)
    try:
        for _ in range(2):
            record = RequestRecord(index=0, arrival_ns=0, send_ns=0, prompt_tokens=2)
            backend.run(backend.stream([Request(prompt=[1, 2], max_new_tokens=1)], [record]))
            assert record.output_tokens == 1
            time.sleep(0.8)  # the loop is stopped while the server closes the idle connection
    finally:
        backend.unload()


def test_close_cancels_pending_tasks_and_runs_the_last_coroutine() -> None:
    loop = EventLoop()
    loop.open()
    closed: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            closed.append("cancelled")
            raise

    async def start() -> None:
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)

    async def last() -> None:
        closed.append("last")

    loop.run(start())
    loop.close(last())
    assert closed == ["last", "cancelled"] and not loop.is_open
    loop.close()  # idempotent


def test_run_before_open_is_a_clear_error() -> None:
    async def nothing() -> None:
        return None

    with pytest.raises(RuntimeError, match="load\\(\\) first"):
        EventLoop().run(nothing())
