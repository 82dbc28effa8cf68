"""One private asyncio event loop for a streaming backend's whole life (OpenAI client, vLLM).

A backend opens it when it loads, runs every coroutine on it (``run``: requests, scoring,
the load driver's whole phase; each run first catches up with what the sockets received
while the loop was stopped) and closes it when it unloads: pending tasks (vLLM's
output-queue task, aiohttp's connector) are cancelled and awaited first, so nothing is
left half-run and no "Task was destroyed but it is pending" warning is printed.

``EventLoop(fast=True)`` (the HTTP clients) runs on uvloop where it is installed: the same asyncio
API at a fraction of the CPU per network read (libuv instead of the selector loop). The in-process
vLLM engine keeps the standard loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TypeVar

T = TypeVar("T")


async def _caught_up(coro: Coroutine[object, None, T]) -> T:
    """Let the loop handle what arrived while it was stopped, then run ``coro``.

    Between two ``run`` calls nobody reads the sockets: a server that closed an idle
    keep-alive connection meanwhile (uvicorn after 5 s) is noticed only now. Three loop
    turns deliver its EOF and mark the pooled connection closed, so the next request opens
    a new one instead of failing with "Can not write request body".
    """
    for _ in range(3):
        await asyncio.sleep(0)
    return await coro


def new_loop(fast: bool) -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when ``fast`` and uvloop is installed, else asyncio's own."""
    if fast:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def loop_kind(loop: asyncio.AbstractEventLoop | None) -> str:
    """``uvloop 0.23.0`` or ``asyncio`` (for provenance)."""
    if loop is not None and type(loop).__module__.startswith("uvloop"):
        import uvloop

        return f"uvloop {uvloop.__version__}"
    return "asyncio"


class EventLoop:
    """A lazily opened event loop owned by one backend; ``close()`` is idempotent."""

    def __init__(self, fast: bool = False) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fast = fast

    @property
    def is_open(self) -> bool:
        return self._loop is not None and not self._loop.is_closed()

    def open(self) -> None:
        """Create the loop unless it is open already."""
        if not self.is_open:
            self._loop = new_loop(self._fast)

    @property
    def kind(self) -> str:
        """Which loop it is (``uvloop 0.23.0`` or ``asyncio``)."""
        return loop_kind(self._loop) if self.is_open else ("uvloop" if self._fast else "asyncio")

    def run(self, coro: Coroutine[object, None, T]) -> T:
        """Run ``coro`` to completion on this loop; raises when the loop is not open."""
        if not self.is_open:
            coro.close()  # never awaited: say so quietly instead of a RuntimeWarning
            raise RuntimeError("the backend's event loop is not open: load() first")
        assert self._loop is not None
        return self._loop.run_until_complete(_caught_up(coro))

    def close(self, last: Coroutine[object, None, object] | None = None) -> None:
        """Run ``last`` (e.g. closing an HTTP session), cancel what is still pending, close."""
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            if last is not None:
                last.close()
            return
        try:
            if last is not None:
                loop.run_until_complete(last)
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            loop.close()
