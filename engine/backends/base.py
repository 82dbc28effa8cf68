"""The backend Protocol and its lazy registry.

A backend loads a model for a recipe on a device, generates for a batch of prompts
while handing every chunk to a :class:`ChunkSink` stamped with
``time.perf_counter_ns()`` at the moment the tokens are available on the host, says
what it ran, and unloads. Backends never compute metrics.

The registry maps engine names to ``"module:Class"`` strings, so importing this
module (as the UI does) never imports torch or vllm.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from engine.models import ResolvedModel

REGISTRY: dict[str, str] = {
    "transformers": "engine.backends.transformers_backend:TransformersBackend",
}

Progress = Callable[[str, float | None], None]


class BackendError(RuntimeError):
    """The engine failed; the message is the reason stored with the failed run."""


class ChunkSink(Protocol):
    """Receives chunks: batch row, stamp in perf_counter_ns, tokens in the chunk."""

    def chunk(self, row: int, t_ns: int, n_tokens: int) -> None: ...


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int
    ignore_eos: bool = True


@dataclass
class LoadReport:
    """What was loaded and how: the time it took and the knobs actually applied."""

    load_s: float
    device_name: str
    applied: dict[str, Any] = field(default_factory=dict)
    parameters: int | None = None
    vocab_size: int | None = None
    context_length: int | None = None


@runtime_checkable
class Backend(Protocol):
    """One inference engine. Instances are single-use: load, generate..., unload."""

    name: str

    def load(self, model: ResolvedModel, recipe: Any, device: str, progress: Progress) -> LoadReport: ...

    def tokenizer(self) -> Any | None:
        """The tokenizer, or None for synthetic weights."""
        ...

    def generate(self, prompts: list[list[int]], params: GenerationParams, sink: ChunkSink) -> int:
        """Generate for one batch; returns the perf_counter_ns stamp taken at send."""
        ...

    def info(self) -> dict[str, Any]:
        """Versions and device facts for provenance."""
        ...

    def peak_memory_bytes(self) -> int | None: ...

    def reset_peak_memory(self) -> None: ...

    def unload(self) -> None: ...


def get_backend(engine: str) -> Backend:
    """Instantiate the backend registered under ``engine`` (imports it now)."""
    target = REGISTRY.get(engine)
    if target is None:
        raise BackendError(f"unknown engine {engine!r}; available: {', '.join(sorted(REGISTRY))}")
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()
