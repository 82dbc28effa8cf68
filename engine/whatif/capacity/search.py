"""The highest passing rate (pure): grow or shrink from a start, then bisect geometrically.

``passes(rate)`` is asked at rates chosen so: the start first; while every probe passed, the rate
doubles; while every probe failed, it halves, and after two failed halvings it jumps to the floor
(``start x floor_share``: a load light enough that requests barely meet, their unloaded latency);
once a passing rate lies below a failing one, their geometric mean, until the two are within
``resolution`` of each other (relative). The bracket's low end is the highest passing rate below the
lowest failing one, so a probe that passes above a failure (a noisy sample) never widens the answer.
The search ends without converging after ``max_probes`` probes (the bracket so far is the answer), at
:data:`MAX_RATE`, or when even the floor fails (the SLO is not met at any rate). Rates already known
(``known``: another SLO's probes of the same simulations) count as probes made, at no cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

MAX_RATE = 1_000_000.0  # requests per second: the most a workload takes


@dataclass(frozen=True)
class Bracket:
    """The search's answer: the highest passing rate (None: none passed) and the lowest failing one."""

    low: float | None
    high: float | None
    converged: bool
    why: str
    probes: list[tuple[float, bool]] = field(default_factory=list)  # in the order made (known ones first)


def bracket_of(results: Mapping[float, bool]) -> tuple[float | None, float | None]:
    """``(low, high)``: the highest passing rate below the lowest failing one, and that failing rate."""
    fails = [r for r, ok in results.items() if not ok]
    high = min(fails) if fails else None
    passes = [r for r, ok in results.items() if ok and (high is None or r < high)]
    return (max(passes) if passes else None), high


def _next(results: Mapping[float, bool], start: float, floor: float, resolution: float) -> tuple[float | None, str]:
    """The next rate to probe, or None and why the search is over."""
    low, high = bracket_of(results)
    if not results:
        return start, ""
    if low is not None and high is not None:
        if high / low <= 1 + resolution * (1 + 1e-9):
            return None, f"bracket within {resolution:.0%}"
        return float(f"{math.sqrt(low * high):.6g}"), ""
    if high is None:
        if low >= MAX_RATE:
            return None, f"passes at the most a workload takes ({MAX_RATE:g}/s)"
        return min(low * 2, MAX_RATE), ""
    if floor in results or high <= floor:
        return None, f"fails even at {high:.3g}/s, where requests barely meet"
    return (floor if high <= start / 4 * (1 + 1e-9) else high / 2), ""


def search(
    passes: Callable[[float], bool],
    start: float,
    *,
    resolution: float = 0.03,
    max_probes: int = 12,
    floor_share: float = 0.01,
    known: Mapping[float, bool] | None = None,
) -> Bracket:
    """The highest rate ``passes`` accepts, searched from ``start`` (module doc)."""
    if not (start > 0 and resolution > 0 and max_probes >= 1 and 0 < floor_share < 1):
        raise ValueError("start, resolution and max_probes must be positive, floor_share within (0, 1)")
    results: dict[float, bool] = dict(known or {})
    order = list(results.items())
    floor = float(f"{start * floor_share:.6g}")
    made = 0
    while True:
        rate, why = _next(results, start, floor, resolution)
        if rate is None or made >= max_probes:
            low, high = bracket_of(results)
            done = rate is None and low is not None and high is not None
            return Bracket(low, high, done, why or f"all {max_probes} probes made", order)
        ok = bool(passes(rate))
        results[rate] = ok
        order.append((rate, ok))
        made += 1
