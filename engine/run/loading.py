"""The loading phase: the recipe's engine loaded once per run, or once for a sweep's points where it allows it.

The weights are resolved and loaded into the recipe's engine for one run, or for several runs of one recipe
(:class:`HeldLoad`: a sweep's points).

A held load is reused only by a run of the same model, recipe and device, and only after the engine has emptied
what the last run left that would change the next one's figures (:meth:`Backend.between_runs`: vLLM's prefix
cache, transformers' continuous-batching blocks). A run that fails unloads it, so the next run loads afresh.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from engine.backends.base import Backend, LoadReport, get_backend
from engine.spec import JobSpec
from engine.weights import models
from engine.weights.models import ResolvedModel


class LoadProgress(Protocol):
    """Where the phase says what it does (the runner's ProgressState)."""

    note: str

    def enter(self, phase: str, note: str = "") -> None: ...


@dataclass
class Loaded:
    """The loading phase's outcome: the weights, the engine holding them, and its report."""

    resolved: ResolvedModel
    backend: Backend
    report: LoadReport


@dataclass
class HeldLoad:
    """A load that serves several runs of one recipe (:mod:`engine.jobs.sweep`): the first run loads it and leaves
    it loaded, the next runs of the same model, recipe and device reuse it; a failed run unloads it (the runner);
    :meth:`close` unloads it at the end. Only for an engine whose descriptor says ``runs_per_load``, in one process
    (no tensor-parallel ranks): :func:`holds_loads`."""

    loaded: Loaded | None = None
    key: str = ""  # the model, recipe and device it holds
    runs: int = 0  # the runs it has served

    def close(self) -> None:
        loaded, self.loaded, self.runs = self.loaded, None, 0
        if loaded is not None:
            loaded.backend.unload()


def holds_loads(spec: JobSpec) -> bool:
    """Whether one load of ``spec``'s recipe can serve several runs (capability ``runs_per_load``, one rank)."""
    from engine.run import tensor_parallel
    from engine.spec import engines

    return engines.get(spec.recipe.engine).capabilities.runs_per_load and tensor_parallel.world_size(spec) == 1


def load(spec: JobSpec, state: LoadProgress, log: Callable[[str], None], several: bool = False) -> Loaded:
    """Resolve the weights and load them (``several``: the load will serve several runs)."""
    state.enter("loading", "resolving weights")
    resolved = models.resolve(spec.model, progress=lambda msg, _f: (log(msg), setattr(state, "note", msg)))
    backend = get_backend(spec.recipe.engine)
    if several:
        backend.serve_several_runs()
    report = backend.load(resolved, spec.recipe, spec.device, lambda msg, _f: setattr(state, "note", msg))
    log(f"loaded {resolved.label} in {report.load_s:.1f} s on {report.device_name}")
    return Loaded(resolved, backend, report)


def load_or_reuse(spec: JobSpec, state: LoadProgress, log: Callable[[str], None], held: HeldLoad) -> Loaded:
    """``held``'s load when it holds this model, recipe and device (emptied of the last run's leftovers first),
    else a new load that ``held`` keeps (any other it held is unloaded)."""
    key = json.dumps([spec.model.model_dump(mode="json"), spec.recipe.model_dump(mode="json"), spec.device])
    if held.loaded is not None and held.key == key:
        state.enter("loading", "reusing the loaded model")
        try:
            held.loaded.backend.between_runs()
        except BaseException:
            held.close()
            raise
        held.runs += 1
        log(f"reusing {held.loaded.resolved.label}, loaded for an earlier run (run {held.runs} on this load)")
        return held.loaded
    held.close()
    held.loaded, held.key, held.runs = load(spec, state, log, several=True), key, 1
    return held.loaded
