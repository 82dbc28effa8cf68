"""The simulator's input: one :class:`SimRequest` per request, from a job's own request plan.

A request is its prompt length and the hashes of its prompt's full KV blocks (what the prefix
cache keys), its output length, its due time when the plan has one (a trace), its planned
cancellation, and its session and turn. A session's later turn is planned with only its new
message (as :mod:`engine.run.sources.sessions` plans it): the simulator builds its prompt when it
is due, from the previous turn's prompt, that turn's simulated reply and the new message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.run.plan import PlannedRequest, RequestPlan
from engine.whatif.serving.hashes import prompt_hashes

_EMPTY = np.zeros(0, dtype=np.uint64)


@dataclass(frozen=True, eq=False, slots=True)
class SimRequest:
    """One request as the simulator sees it.

    ``block_hashes`` (uint64) key the prompt's full blocks of ``block_size`` tokens
    (:func:`sim_request` computes them); ``prompt_state`` is the prompt's own hash, to extend
    with its outputs. A later turn of a session (``turn`` > 0) carries its new message's token
    ids in ``turn_ids`` and no prompt of its own: ``prompt_tokens`` is then the new message's length.
    """

    index: int
    prompt_tokens: int
    output_tokens: int
    block_size: int
    block_hashes: np.ndarray = field(default_factory=lambda: _EMPTY)
    prompt_state: int = 0
    due_s: float | None = None  # seconds after the phase start; None: the arrival process says
    cancel_after_s: float | None = None  # the client closes the request this long after sending it
    session: int | None = None
    turn: int | None = None
    turn_ids: np.ndarray | None = None

    @property
    def later_turn(self) -> bool:
        """A session's turn after its first: its prompt is built when it is due."""
        return self.session is not None and bool(self.turn)


def sim_request(
    index: int,
    prompt_ids: Sequence[int] | np.ndarray,
    output_tokens: int,
    block_size: int = 16,
    *,
    due_s: float | None = None,
    cancel_after_s: float | None = None,
    session: int | None = None,
    turn: int | None = None,
) -> SimRequest:
    """A request from its prompt token ids (hashed once, vectorised); a later session turn keeps
    ``prompt_ids`` as its new message."""
    if output_tokens < 1:
        raise ValueError(f"request {index}: output tokens must be at least 1, not {output_tokens}")
    ids = np.asarray(prompt_ids, dtype=np.int64)
    if session is not None and turn:
        return SimRequest(
            index, len(ids), output_tokens, block_size, _EMPTY, 0, due_s, cancel_after_s, session, turn, ids
        )
    if len(ids) < 1:
        raise ValueError(f"request {index}: a prompt needs at least one token")
    hashes, state = prompt_hashes(ids, block_size)
    return SimRequest(index, len(ids), output_tokens, block_size, hashes, state, due_s, cancel_after_s, session, turn)


TurnIds = Callable[[PlannedRequest], Sequence[int]]


def _turn_ids(plan: RequestPlan) -> TurnIds:
    """A later turn's new message as token ids: its own prompt where planned, else its messages
    through the plan's chat template (which may add what a template adds to any conversation)."""

    def ids(planned: PlannedRequest) -> Sequence[int]:
        request = planned.request
        if request.prompt or plan.chat_ids is None or not request.messages:
            return request.prompt
        return plan.chat_ids(request.messages)

    return ids


def requests_from_plan(
    plan: RequestPlan, block_size: int = 16, *, warmup: bool = False, turn_ids: TurnIds | None = None
) -> list[SimRequest]:
    """The plan's measured requests (its warm-up ones with ``warmup``) as :class:`SimRequest`\\ s,
    in plan order: prompts hashed in blocks of ``block_size``, due times, cancellations, sessions.
    ``turn_ids`` gives a later turn's new message as token ids (default: the plan's chat template)."""
    planned = plan.warmup if warmup else plan.measured
    new_ids = turn_ids or _turn_ids(plan)
    out = []
    for i, p in enumerate(planned):
        later = p.session is not None and bool(p.turn)
        ids = new_ids(p) if later else p.request.prompt
        out.append(
            sim_request(
                i, ids, p.output_tokens, block_size,
                due_s=p.due_s, cancel_after_s=p.cancel_after_s, session=p.session, turn=p.turn,
            )
        )  # fmt: skip
    return out
