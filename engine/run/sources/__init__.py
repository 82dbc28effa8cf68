"""Request sources: each turns a workload's input into a :class:`~engine.run.plan.RequestPlan`.

One registry line per source (``"name": "module:Class"``, imported when a job plans its requests);
the workload says which source it uses (:attr:`engine.spec.workload.Workload.source`). A source
gets the loaded model's tokenizer, vocabulary size and context length (:class:`PlanContext`) and
returns the warm-up and measured requests, each with its own prompt, output length and (for a
trace) due time. Nothing else builds prompts.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

from engine.backends.base import Tokenizer
from engine.run.plan import RequestPlan
from engine.spec import SpecError, Workload

SOURCES: dict[str, str] = {
    "synthetic": "engine.run.sources.synthetic:SyntheticSource",
    "prompt_file": "engine.run.sources.prompt_file:PromptFileSource",
}


@dataclass(frozen=True)
class PlanContext:
    """What a source may know of the loaded model."""

    tokenizer: Tokenizer | None  # None: synthetic weights (prompts are random token ids)
    vocab_size: int
    context_length: int | None


class RequestSource(Protocol):
    """Turns a workload's input into the requests a job sends."""

    name: str

    def plan(self, workload: Workload, ctx: PlanContext) -> RequestPlan:
        """The warm-up and measured requests (``workload.warmup`` and ``workload.requests`` of them,
        unless the source's own input says how many); raises SpecError for bad input, in one line."""
        ...


def get_source(name: str) -> RequestSource:
    """The source registered under ``name`` (imports it now)."""
    target = SOURCES.get(name)
    if target is None:
        raise SpecError(f"unknown request source {name!r}; available: {', '.join(SOURCES)}")
    module_name, class_name = target.split(":")
    source: RequestSource = getattr(importlib.import_module(module_name), class_name)()
    return source


def plan_requests(workload: Workload, ctx: PlanContext) -> RequestPlan:
    """The workload's plan, from the source it names, checked against the model's context."""
    plan = get_source(workload.source).plan(workload, ctx)
    plan.check_context(ctx.context_length, workload.source_label)
    return plan
