"""Each request's time limit, kept by one timer for all of them.

``asyncio.timeout`` arms and cancels a loop timer per request: at hundreds of streams that costs
more than the rest of a request's bookkeeping (on uvloop each timer is a libuv handle, made,
started, stopped and closed). :class:`Deadlines` notes each request's task and when it is due in
a dict, and one timer, while any request is open, cancels the tasks whose limit has passed. A
request therefore ends within a check period after its limit (a quarter of the limit, at most
a second), and :meth:`Deadlines.leave` says whether it was the limit that cancelled it.
"""

from __future__ import annotations

import asyncio
import time


class Deadlines:
    """Time limits of the requests open on one event loop: ``enter`` when a request starts, ``leave`` when it ends."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.check_s = min(1.0, seconds / 4)
        self._due: dict[asyncio.Task[object], int] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def enter(self) -> asyncio.Task[object]:
        """The current task's request starts: it is due ``seconds`` from now."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a request's time limit needs a task")
        self._due[task] = time.perf_counter_ns() + int(self.seconds * 1e9)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.check_s, self._check)
        return task

    def leave(self, task: asyncio.Task[object]) -> bool:
        """The request ended (again: nothing more happens); True when its limit cancelled it and nothing
        else did (the limit's cancellation is taken back: the request failed, the task goes on)."""
        self._due.pop(task, None)
        if not self._due and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if task in self._expired:
            self._expired.discard(task)
            return task.uncancel() == 0
        return False

    def _check(self) -> None:
        now = time.perf_counter_ns()
        for task, due in list(self._due.items()):
            if due <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.check_s, self._check) if self._due else None
