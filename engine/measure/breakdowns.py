"""Figures of a run broken down by what its requests were (pure): the turns of multi-turn sessions.

A session's later turns carry the conversation so far, so a prefix cache shows as TTFT falling over
turns (or rising less than the prompt does). ``metrics["turns"]`` holds, per turn, how many requests
completed, their mean prompt length, the share of their prompt tokens the engine found in its prefix
cache (where it says), and their TTFT and E2EL groups (percentiles with their 95 % intervals, as the
run's own).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.jsonvalue import JSONObject
from engine.measure.metrics import NS_PER_MS, latency_group
from engine.measure.records import RequestRecord
from engine.measure.stamps import cached_share, e2el_ns, measured_requests, ttft_ns


def per_turn(requests: Sequence[RequestRecord]) -> list[JSONObject] | None:
    """One row per turn of the run's sessions (None when no request belongs to a session)."""
    by_turn: dict[int, list[RequestRecord]] = {}
    for r in measured_requests(requests):
        if r.turn is not None and r.ok:
            by_turn.setdefault(r.turn, []).append(r)
    if not by_turn:
        return None
    return [
        {
            "turn": turn,
            "n": len(rows),
            "prompt_tokens_mean": sum(r.prompt_tokens for r in rows) / len(rows),
            "cached_share": cached_share(rows),
            "ttft_ms": latency_group([v / NS_PER_MS for r in rows if (v := ttft_ns(r)) is not None]),
            "e2el_ms": latency_group([v / NS_PER_MS for r in rows if (v := e2el_ns(r)) is not None]),
        }
        for turn, rows in sorted(by_turn.items())
    ]
