"""A phase's requests as a plan: what each request sends, when it is due, and its own output length.

A *request source* (:mod:`engine.run.sources`) turns a workload's input (synthetic lengths, a
prompt file; datasets, traces and sessions in time) into a :class:`RequestPlan` once the model
is loaded (sources need its tokenizer and context). The load driver (:mod:`engine.run.load`)
only consumes the plan: it never builds a prompt.

Each :class:`PlannedRequest` carries the :class:`~engine.backends.base.Request` an engine
receives (prompt token ids, chat messages where the source has them, its own
``max_new_tokens``), its due time (seconds from the phase start; None: the workload's arrival
process decides), and optionally its session and turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.backends.base import Request
from engine.spec import SpecError


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of a plan."""

    request: Request
    due_s: float | None = None  # seconds after the phase start; None: the arrival process says
    session: int | None = None
    turn: int | None = None

    @property
    def prompt_tokens(self) -> int:
        return len(self.request.prompt)

    @property
    def output_tokens(self) -> int:
        return self.request.max_new_tokens


@dataclass
class RequestPlan:
    """The warm-up and measured requests of a job, and what the source counted while making them."""

    source: str
    warmup: list[PlannedRequest]
    measured: list[PlannedRequest]
    facts: dict[str, Any] = field(default_factory=dict)  # e.g. rows skipped or clipped, a file's hash

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
    facts: dict[str, Any] | None = None,
) -> RequestPlan:
    """A plan of plain prompts: the first ``warmup`` warm up, the rest are measured; one output
    length for all or one per prompt; due times left to the arrival process."""
    requests = planned(prompts, output_tokens, ignore_eos)
    return RequestPlan(source=source, warmup=requests[:warmup], measured=requests[warmup:], facts=dict(facts or {}))
