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
from engine.run.plan import RequestPlan, with_cancellations
from engine.spec import JobSpec, SpecError, Workload

SOURCES: dict[str, str] = {
    "synthetic": "engine.run.sources.synthetic:SyntheticSource",
    "prompt_file": "engine.run.sources.prompt_file:PromptFileSource",
    "dataset": "engine.run.sources.dataset:DatasetSource",
    "sessions": "engine.run.sources.sessions:SessionsSource",
    "trace": "engine.run.sources.trace:TraceSource",
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
    """The workload's plan, from the source it names, checked against the model's context, with the
    workload's planned cancellations."""
    plan = get_source(workload.source).plan(workload, ctx)
    plan.check_context(ctx.context_length, workload.source_label)
    return with_cancellations(plan, workload.cancel_rate, workload.cancel_after_ms, workload.seed)


def input_file(workload: Workload) -> str | None:
    """The local file or folder the workload's requests come from (a prompt file, a dataset, a trace)."""
    if workload.trace is not None:
        return workload.trace
    if workload.dataset is not None and not workload.dataset.startswith("hf:"):
        return workload.dataset
    return workload.prompt_file


def pinned(spec: JobSpec) -> JobSpec:
    """``spec`` with its input file's content hash (``workload.source_sha256``), part of the fingerprint,
    so that two runs of one spec on different files never read as one recipe. A hash given already
    must still match the file: a file changed since the job was queued is refused."""
    from engine.data.reading import content_hash

    path = input_file(spec.workload)
    if path is None or (spec.workload.prompt_file is not None and spec.workload.source_sha256 is None):
        return spec  # prompt files keep the fingerprints of the runs stored before hashes existed
    digest = content_hash(path)
    given = spec.workload.source_sha256
    if given is not None and given != digest:
        raise SpecError(f"{path} changed since the job was queued (its content hash differs); queue it again")
    if given is not None:
        return spec
    workload = spec.workload.model_copy(update={"source_sha256": digest})
    return spec.model_copy(update={"workload": workload})
