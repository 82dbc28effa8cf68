"""What every step of the accuracy phase needs, passed as one object instead of ten
parameters: the job, the loaded backend, the workload's prompts, progress, log, notes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from engine.backends.base import Backend
from engine.spec import JobSpec

if TYPE_CHECKING:
    from engine.weights.models import ResolvedModel

Log = Callable[[str], None]


class PhaseState(Protocol):
    """The job's live state the phase writes its progress into (the runner's ProgressState)."""

    tokens_done: int
    tokens_total: int
    note: str


@dataclass
class Progress:
    """Writes the phase's progress into the job's live state (when there is one)."""

    state: PhaseState | None

    def set(self, done: int, total: int, note: str) -> None:
        if self.state is None:
            return
        self.state.tokens_done, self.state.tokens_total, self.state.note = done, total, note


@dataclass
class PhaseContext:
    """One accuracy phase: the job, the recipe's loaded backend and where things go.

    ``load_reference`` loads a backend with the reference recipe (None: not possible here);
    ``notes`` collects why figures are missing (stored as the quality dict's ``notes``).
    """

    spec: JobSpec
    backend: Backend
    resolved: ResolvedModel | None
    prompts: list[list[int]]
    progress: Progress
    log: Log
    context_length: int | None = None
    load_reference: Callable[[], Backend] | None = None
    notes: dict[str, str] = field(default_factory=dict)
