"""A phase's requests as a plan: what each request sends, when it is due, and its own output length.

A *request source* (:mod:`engine.run.sources`) turns a workload's input (synthetic lengths, a
prompt file; datasets, traces and sessions in time) into a :class:`RequestPlan` once the model
is loaded (sources need its tokenizer and context). The load driver (:mod:`engine.run.driver`)
only consumes the plan: it never builds a prompt.

Each :class:`PlannedRequest` carries the :class:`~engine.backends.base.Request` an engine
receives (prompt token ids, chat messages where the source has them, its own
``max_new_tokens``), its due time (seconds from the phase start; None: the workload's arrival
process decides), and optionally its session and turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from engine.backends.base import Message, Request
from engine.jsonvalue import JSONObject
from engine.spec import SpecError


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of a plan."""

    request: Request
    due_s: float | None = None  # seconds after the phase start; None: the arrival process says
    session: int | None = None  # a session's turns are sent in order, each after the reply to the one before
    turn: int | None = None
    cancel_after_s: float | None = None  # the client closes the request this long after sending it

    @property
    def prompt_tokens(self) -> int:
        return len(self.request.prompt)

    @property
    def output_tokens(self) -> int:
        return self.request.max_new_tokens


ChatIds = Callable[[Sequence[Message]], list[int]]  # a conversation as prompt token ids (chat template applied)


@dataclass
class RequestPlan:
    """The warm-up and measured requests of a job, and what the source counted while making them.

    A session's later turns are planned with only their new user message; the driver builds
    their prompts when they are due, from the conversation so far (with the replies actually
    returned), through ``chat_ids``.
    """

    source: str
    warmup: list[PlannedRequest]
    measured: list[PlannedRequest]
    facts: JSONObject = field(default_factory=dict)  # e.g. rows skipped or clipped, a file's hash
    chat_ids: ChatIds | None = None
    think_time_s: float = 0.0  # sessions: mean of the exponential gap between a reply and the next turn

    @property
    def scheduled(self) -> bool:
        """Whether the source gives due times (a trace) instead of the arrival process."""
        return any(p.due_s is not None for p in self.measured)

    def check_context(self, context_length: int | None, what: str) -> None:
        """Refuse a plan whose prompt plus output exceeds the model's context (``what`` names the input)."""
        if context_length is None:
            return
        for planned in (*self.warmup, *self.measured):
            if planned.prompt_tokens + planned.output_tokens > context_length:
                raise SpecError(
                    f"{what}: a prompt of {planned.prompt_tokens} tokens plus {planned.output_tokens} output tokens "
                    f"exceeds the model's context of {context_length}"
                )


def planned(
    prompts: Sequence[list[int]], output_tokens: int | Sequence[int], ignore_eos: bool = True
) -> list[PlannedRequest]:
    """Plain prompts as planned requests: one output length for all or one per prompt, no due times."""
    lengths = [output_tokens] * len(prompts) if isinstance(output_tokens, int) else list(output_tokens)
    return [
        PlannedRequest(Request(prompt=list(p), max_new_tokens=n, ignore_eos=ignore_eos))
        for p, n in zip(prompts, lengths, strict=True)
    ]


def plan_of(
    source: str,
    prompts: Sequence[list[int]],
    output_tokens: int | Sequence[int],
    warmup: int,
    ignore_eos: bool = True,
    facts: JSONObject | None = None,
) -> RequestPlan:
    """A plan of plain prompts: the first ``warmup`` warm up, the rest are measured; one output
    length for all or one per prompt; due times left to the arrival process."""
    requests = planned(prompts, output_tokens, ignore_eos)
    return RequestPlan(source=source, warmup=requests[:warmup], measured=requests[warmup:], facts=dict(facts or {}))


def with_cancellations(plan: RequestPlan, rate: float, after_ms: float | None, seed: int) -> RequestPlan:
    """The plan with a seeded ``rate`` share of its measured requests cancelled ``after_ms`` after their send."""
    if rate <= 0 or after_ms is None or not plan.measured:
        return plan
    rng = np.random.default_rng(seed + 7)
    chosen = rng.random(len(plan.measured)) < rate
    measured = [
        replace(p, cancel_after_s=after_ms / 1000.0) if c else p for p, c in zip(plan.measured, chosen, strict=True)
    ]
    return replace(plan, measured=measured, facts={**plan.facts, "cancel_planned": int(chosen.sum())})
