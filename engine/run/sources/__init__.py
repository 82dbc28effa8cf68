"""Request planners: each turns a workload's traffic into a :class:`~engine.run.plan.RequestPlan`.

A source is declared once, in :mod:`engine.spec.sources` (its options, its words, its planner named as
``"module:Class"``, imported when a job plans its requests); the workload's traffic says which it is.
A planner gets the traffic's options, the workload and the loaded model's tokenizer, vocabulary size
and context length (:class:`PlanContext`) and returns the warm-up and measured requests, each with
its own prompt, output length and (for a trace) due time. Nothing else builds prompts.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

from engine.backends.base import Tokenizer
from engine.jsonvalue import JSONObject
from engine.run.plan import RequestPlan, with_cancellations
from engine.spec import JobSpec, SpecError, Workload, sources
from engine.spec.sources.base import TrafficSource


@dataclass(frozen=True)
class PlanContext:
    """What a source may know of the loaded model."""

    tokenizer: Tokenizer | None  # None: synthetic weights (prompts are random token ids)
    vocab_size: int
    context_length: int | None


class Planner(Protocol):
    """Turns a workload's traffic into the requests a job sends."""

    name: str

    def check(self, traffic: TrafficSource, workload: Workload, ctx: PlanContext | None) -> JSONObject:
        """Its whole input checked before any model loads, with the model's light context where there is one
        (:mod:`engine.run.sources.context`; None: the model's files are not here yet): what the job would send
        (``requests``, ``duration_s`` where it has a schedule, what it counted), or SpecError in one line naming
        the file, the line and the field (:mod:`engine.run.sources.check` caches the answer by content)."""
        ...

    def plan(self, traffic: TrafficSource, workload: Workload, ctx: PlanContext) -> RequestPlan:
        """The warm-up and measured requests (``workload.warmup`` and ``workload.requests`` of them,
        unless the source's own input says how many); raises SpecError for bad input, in one line."""
        ...


def planner_of(traffic: TrafficSource) -> Planner:
    """The planner the traffic's source names (imported now)."""
    target = sources.get(traffic.source).planner
    module_name, class_name = target.split(":")
    planner: Planner = getattr(importlib.import_module(module_name), class_name)()
    return planner


def plan_requests(workload: Workload, ctx: PlanContext) -> RequestPlan:
    """The workload's plan, from its traffic's planner, checked against the model's context, with the
    workload's planned cancellations."""
    plan = planner_of(workload.traffic).plan(workload.traffic, workload, ctx)
    plan.check_context(ctx.context_length, workload.traffic.words())
    return with_cancellations(plan, workload.cancel_rate, workload.cancel_after_ms, workload.seed)


def pinned(spec: JobSpec) -> JobSpec:
    """``spec`` with its input file's content hash (``workload.source_sha256``), part of the fingerprint,
    so that two runs of one spec on different files never read as one recipe. A hash given already
    must still match the file: a file changed since the job was queued is refused."""
    from engine.data.reading import content_hash

    traffic = spec.workload.traffic
    path = traffic.input_path()
    given = traffic.content_hash()
    if path is None or (traffic.source == "prompt_file" and given is None):
        return spec  # prompt files keep the fingerprints of the runs stored before hashes existed
    digest = content_hash(path)
    if given is not None and given != digest:
        raise SpecError(f"{path} changed since the job was queued (its content hash differs); queue it again")
    if given is not None:
        return spec
    workload = spec.workload.model_copy(update={"traffic": traffic.model_copy(update={"source_sha256": digest})})
    return spec.model_copy(update={"workload": workload})
