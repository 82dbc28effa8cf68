"""Pre-flight: everything about a job that can be checked before its weights load.

The rules are pure (:mod:`engine.spec` and each engine's ``rules``); the facts of the
machine are each engine's own to judge: its descriptor names a pre-flight function
(``engine/backends/<engine>/preflight.py``: GPUs, compute capability, packages, an API
key's variable), imported here when a job is checked. Nothing here imports torch, so the
app's server can check a spec.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from engine.run.policy import check_inputs
from engine.spec import JobSpec, SpecError, Workload, engines
from engine.spec.descriptor import EngineDescriptor
from engine.weights import models


def engine_preflight(descriptor: EngineDescriptor) -> Callable[[JobSpec, bool], None]:
    """The engine's pre-flight function (its descriptor's ``"module:function"``, imported now); a no-op if none."""
    if descriptor.preflight is None:
        return lambda _spec, _runtime: None
    module_name, function = descriptor.preflight.split(":")
    return getattr(importlib.import_module(module_name), function)


def preflight(spec: JobSpec, *, runtime: bool = True) -> None:
    """Everything that can be checked before loading weights; raises SpecError.

    ``runtime=False`` skips the facts of *this* machine (compute capability, installed
    packages, GPU count): a job queued for another host's GPU is checked there, when its
    job process starts, and a failure is stored with its reason.
    """
    descriptor = engines.get(spec.recipe.engine)  # SpecError naming the registered engines
    check_inputs(spec)  # every file the job reads, under the operator's roots, before any is opened
    models.check(spec.model)
    shapes = spec.recipe.shape_problems(models.declared_config(spec.model), spec.device)
    if shapes:
        raise SpecError("; ".join(shapes))
    engine_preflight(descriptor)(spec, runtime)  # the engine's own checks of this machine
    validate_serving(spec.workload, spec.recipe.engine)
    if spec.quality.enabled:
        from engine.accuracy import evaluate

        evaluate.check(spec)
    wl = spec.workload
    if wl.prompt_file is not None:
        if spec.model.kind == "synthetic":
            raise SpecError("a prompt file needs a model with a tokenizer; synthetic weights take --prompt-tokens")
        _check_prompt_file(wl.prompt_file)
    _check_traffic(spec)
    context = models.declared_context_length(spec.model)
    if context is not None and wl.prompt_tokens is not None and wl.prompt_tokens + wl.output_tokens > context:
        raise SpecError(
            f"prompt ({wl.prompt_tokens}) + output ({wl.output_tokens}) tokens exceed the model's context of "
            f"{context} tokens; shorten the prompt or the output"
        )


def _check_traffic(spec: JobSpec) -> None:
    """A dataset's first record, a trace's first rows, a Hub dataset's reachability: bad input fails
    here, before loading, in one line (the rest of the file is checked while the plan is made, still
    before anything is stored)."""
    wl = spec.workload
    if wl.dataset is not None:
        from engine.data.conversations import check_dataset

        if spec.model.kind == "synthetic":
            raise SpecError("a dataset needs a model with a tokenizer; synthetic weights take --prompt-tokens")
        check_dataset(wl.dataset, wl.dataset_format, wl.dataset_column)
    if wl.trace is not None:
        from itertools import islice

        from engine.data.reading import existing_file
        from engine.data.traces import trace_format

        entries = trace_format(wl.trace_format).entries(existing_file(wl.trace, "trace"))
        if not list(islice(entries, 100)):
            raise SpecError(f"trace {wl.trace} holds no rows")


def _check_prompt_file(path: str) -> None:
    """Read the prompt file now (exists, UTF-8, at least one prompt), so a bad one fails before loading."""
    from engine.run.sources.prompt_file import read_prompt_file

    try:
        read_prompt_file(path)
    except (RecursionError, OSError) as exc:
        raise SpecError(f"prompt file {path} cannot be read: {type(exc).__name__}") from exc


def validate_serving(workload: Workload, engine: str) -> None:
    """Raise SpecError for loads an engine cannot drive (pure)."""
    serving = engines.get(engine).capabilities.serving  # a serving engine takes many requests at once
    if not serving and workload.arrival != "batch" and (workload.max_concurrency or 1) > 1:
        raise SpecError(
            f"the {engine} engine serves one request at a time under an arrival process; "
            f"drop max_concurrency or use a serving engine ({', '.join(engines.with_capability('serving'))})"
        )
    if not serving and workload.cancel_rate > 0:
        raise SpecError(
            f"the {engine} engine cannot cancel a request it is generating; cancellations need a serving engine "
            f"({', '.join(engines.with_capability('serving'))})"
        )
