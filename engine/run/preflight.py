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
from engine.run.sources.check import TrafficCheck, check_traffic
from engine.spec import JobSpec, SpecError, Workload, engines
from engine.spec.descriptor import EngineDescriptor
from engine.weights import models


def engine_preflight(descriptor: EngineDescriptor) -> Callable[[JobSpec, bool], None]:
    """The engine's pre-flight function (its descriptor's ``"module:function"``, imported now); a no-op if none."""
    if descriptor.preflight is None:
        return lambda _spec, _runtime: None
    module_name, function = descriptor.preflight.split(":")
    return getattr(importlib.import_module(module_name), function)


def preflight(spec: JobSpec, *, runtime: bool = True) -> TrafficCheck:
    """Everything that can be checked before loading weights; raises SpecError. Returns what the traffic would
    send (its whole input read through, :mod:`engine.run.sources.check`), for the caller to say up front.

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
    traffic = check_traffic(spec)
    declared = (models.declared_context_length(spec.model), spec.recipe.context_limit())
    context = min((c for c in declared if c), default=None)
    prompt = wl.traffic.nominal_prompt_tokens()
    if context is not None and prompt is not None and prompt + wl.output_tokens > context:
        raise SpecError(
            f"prompt ({prompt}) + output ({wl.output_tokens}) tokens exceed the model's context of "
            f"{context} tokens; shorten the prompt or the output"
        )
    return traffic


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
