"""The SLA finder's search over one load axis (pure): bracketing, then bisection to a resolution.

Given the probes so far as ``(load, passed)`` pairs, :func:`next_step` says which load to
probe next, or that the search is over and why:

1. **Bracketing.** The first probe is the start load. While every probe passed, the load
   doubles; while every probe failed, it halves (never below the axis' floor: the
   resolution for a request rate, 1 for a concurrency).
2. **Bisection.** Once a passing load lies below a failing one, the midpoint is probed,
   until the two are at most one resolution apart.

The bracket is ``low`` = the highest passing load below ``high`` = the lowest failing load,
so a noisy probe that passes above a failure does not widen the answer. The search also
ends when ``max_probes`` probes were made (the bracket so far is the answer, marked not
converged), when the load would exceed :data:`MAX_LOAD`, or when even the floor fails.
A concurrency axis probes whole numbers only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_LOAD = 1_000_000.0  # the most a workload accepts (requests/s or requests in flight)


@dataclass(frozen=True)
class Step:
    """What to do after the probes so far: the next load, or the end of the search and why."""

    next_load: float | None
    low: float | None  # the highest passing load (below ``high``)
    high: float | None  # the lowest failing load
    done: bool
    converged: bool = False  # done with ``high - low <= resolution``
    why: str = ""


def bracket(results: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """``(low, high)``: the highest passing load below the lowest failing one, and that failing load."""
    fails = [x for x, ok in results if not ok]
    high = min(fails) if fails else None
    passes = [x for x, ok in results if ok and (high is None or x < high)]
    return (max(passes) if passes else None), high


def next_step(
    results: Sequence[tuple[float, bool]],
    start: float,
    resolution: float,
    max_probes: int,
    integer: bool = False,
) -> Step:
    """The next probe (or the end) of a search that started at ``start`` (see the module doc)."""
    if start <= 0 or resolution <= 0 or max_probes < 1:
        raise ValueError("start, resolution and max_probes must be positive")
    floor = 1.0 if integer else resolution
    low, high = bracket(results)
    if not results:
        return Step(_grid(start, integer), None, None, False, why="start")
    if low is not None and high is not None and high - low <= resolution * (1 + 1e-9):
        return Step(None, low, high, True, True, f"bracket within the resolution ({resolution:g})")
    if len(results) >= max_probes:
        return Step(None, low, high, True, False, f"all {max_probes} probes made")
    probed = {x for x, _ in results}
    if high is None:
        nxt = _grid(max(low * 2, low + 1) if integer else low * 2, integer)
        if low >= MAX_LOAD:
            return Step(None, low, None, True, False, f"passes at the most load a workload takes ({MAX_LOAD:g})")
        return Step(min(nxt, MAX_LOAD), low, None, False, why="every probe passed: doubling")
    if low is None:
        nxt = _grid(high / 2, integer)
        if nxt < floor:
            if high > floor and floor not in probed:
                return Step(floor, None, high, False, why="every probe failed: trying the lowest load")
            return Step(None, None, high, True, False, f"fails even at the lowest load ({high:g})")
        return Step(nxt, None, high, False, why="every probe failed: halving")
    mid = _grid((low + high) / 2, integer)
    if mid <= low or mid >= high or mid in probed:
        return Step(None, low, high, True, True, "no load left between the bracket's ends")
    return Step(mid, low, high, False, why="bisecting")


def _grid(x: float, integer: bool) -> float:
    """A load as probed: a whole number on a concurrency axis, else rounded to 6 significant digits."""
    if integer:
        return float(math.floor(x + 1e-9))
    return float(f"{x:.6g}")
