"""Requests' time limits kept by one timer: a request past its limit is cancelled and told so; others are not."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.backends.openai.deadlines import Deadlines


async def _request(limits: Deadlines, seconds: float) -> str:
    task = limits.enter()
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        if limits.leave(task):
            return "timed out"
        raise
    finally:
        limits.leave(task)
    return "done"


def test_a_request_past_its_limit_ends_within_a_check_period() -> None:
    async def main() -> tuple[list[str], float, bool]:
        limits = Deadlines(0.2)
        t0 = time.perf_counter()
        outcomes = await asyncio.gather(_request(limits, 5), _request(limits, 0.01), _request(limits, 5))
        return outcomes, time.perf_counter() - t0, limits._timer is None

    outcomes, took, idle = asyncio.run(main())
    assert outcomes == ["timed out", "done", "timed out"]
    assert 0.2 <= took < 0.2 + 0.05 + 0.5  # the limit, then at most one check period (0.05 s) and slack
    assert idle  # no timer left behind once no request is open


def test_a_cancel_from_outside_is_not_a_timeout() -> None:
    async def main() -> None:
        limits = Deadlines(10)
        task = asyncio.ensure_future(_request(limits, 5))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert limits._timer is None

    asyncio.run(main())


def test_the_task_goes_on_after_its_request_timed_out() -> None:
    """The limit's cancellation is taken back: the task that sent the request is not cancelled later."""

    async def main() -> str:
        limits = Deadlines(0.1)
        first = await _request(limits, 5)
        await asyncio.sleep(0.05)  # would raise CancelledError if the cancellation were still pending
        return first

    assert asyncio.run(main()) == "timed out"
