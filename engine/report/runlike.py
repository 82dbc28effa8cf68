"""What the reports read of a run, as Protocols: storage's RunSummary and RunDetail fit them, and so do the
namespaces Explore builds from a frame's rows (:mod:`engine.report.explore_report`) and the tests' fakes.
Whether a run is predicted (the serving simulator's) rather than measured is read in one place, :func:`is_predicted`.

Every member is a read-only property, so the frozen dataclasses of :mod:`storage.runs` fit without a copy.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from engine.jsonvalue import JSONMapping


class Measured(Protocol):
    """What a run's figures are read from: its stored metrics and accuracy (either may be missing)."""

    @property
    def metrics(self) -> JSONMapping | None: ...

    @property
    def quality(self) -> JSONMapping | None: ...


class RunLike(Measured, Protocol):
    """A stored run as names, comparisons and verdicts read it: its number, status, name, where it ran, its spec."""

    @property
    def id(self) -> int: ...

    @property
    def status(self) -> str: ...

    @property
    def name(self) -> str | None: ...

    @property
    def error(self) -> str | None: ...

    @property
    def engine(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def device_name(self) -> str | None: ...

    @property
    def created_at(self) -> datetime: ...

    @property
    def spec(self) -> JSONMapping: ...


def is_predicted(run: object) -> bool:
    """Whether a run is predicted by the serving simulator, not measured (storage's ``predicted``; runs and fakes
    without the attribute are measured)."""
    return bool(getattr(run, "predicted", False))
