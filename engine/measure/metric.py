"""What a metric declaration says, and how its values are written for people.

A :class:`Metric` is one figure a run reports: its flat key, label, short header, unit,
direction, kind, display order, where it appears (:data:`PLACES`), its interval rule
(:data:`IntervalRule`) and its computation (``compute``, a function of the measured
:class:`~engine.measure.stamps.Phase`) or its source (the phase that reports it, in words).
The declarations themselves are in :mod:`engine.measure.declarations`; the registry
(:mod:`engine.measure.registry`) holds them and answers every consumer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from engine.jsonvalue import JSONMapping, JSONValue

if TYPE_CHECKING:
    import numpy as np

    from engine.measure.stamps import Phase

Better = Literal["lower", "higher"]
Kind = Literal["latency", "throughput", "accuracy", "memory", "energy", "bookkeeping"]
# How the 95 % interval stored beside a figure is made (engine.measure.metrics, engine.report.verdicts):
# "percentile": the exact order-statistic interval; "mean": Student's t interval of the mean of
# ``samples``; "bootstrap": a seeded bootstrap of sum(column 0) / sum(column 1) over ``samples`` rows
# (tokens or completions with each request's share of the duration); None: no interval.
IntervalRule = Literal["percentile", "mean", "bootstrap"] | None

# Where a figure appears (Metric.shown):
RESULT = "result"  # a top-level figure of the result object (CLI --json, exports, the run page)
COMPARE = "compare"  # a row of Compare's table (its ratios, verdicts, the comparison CSV), in display order
SUMMARY = "summary"  # judged for the plain-language summary (its phrases: engine/report/summary.py)
TRIALS = "trials"  # kept for every trial in metrics["trials"]; with an interval, widened across trials
EXPLORE = "explore"  # a column of the runs frame: Explore's axes, the runs CSV (from the JSON unless COLUMN)
COLUMN = "column"  # its own SQL column of runs (storage/columns.py): a new one needs an Alembic revision
PLACES: tuple[str, ...] = (RESULT, COMPARE, SUMMARY, TRIALS, EXPLORE, COLUMN)

Compute = Callable[["Phase"], JSONValue]
Samples = Callable[["Phase"], "np.ndarray | list[float] | None"]
Reader = Callable[[JSONMapping, JSONMapping], object]


def finite(value: object) -> float | None:
    """A finite float, or None (missing, text, bool, NaN, inf)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class Metric:
    """One reported figure: how to name it, in what unit, which way is better, where it appears,
    how sure it is and where its value comes from."""

    key: str
    label: str
    unit: str  # "ms", "tok/s", "req/s", "bytes", "s", "nats", "ratio" (0..1, shown as %), "" (plain number)
    better: Better | None  # None: no direction (bookkeeping)
    kind: Kind
    short: str = ""  # a short header for narrow tables; the label when empty
    vs_reference: bool = False  # measured against the reference recipe (KL, top-1, flips), not the baseline
    order: int = 0  # display order: tables, axes and lists sort by it
    shown: frozenset[str] = frozenset()  # where it appears: PLACES
    interval: IntervalRule = None
    compute: Compute | None = None  # its value from the measured phase (engine.measure.metrics.compute_metrics)
    samples: Samples | None = None  # the per-request samples behind its interval and Compare's verdict
    source: str = ""  # who reports it when it is not computed from the phase's requests
    read: Reader | None = None  # its value from a stored run's (metrics, quality); None: by its key
    group: str | None = None  # a latency group's statistic: the group (``tpot_ms``) ...
    stat: str | None = None  # ... and the statistic (``p50``)
    aliases: tuple[str, ...] = ()  # other spellings users typed (registry.canonical accepts them)

    @property
    def column(self) -> str:
        """The SQL column name of a stored metric: the key with ``.`` as ``_`` (``quality_perplexity``)."""
        return self.key.replace(".", "_")

    @property
    def stored_column(self) -> bool:
        """Kept in its own SQL column of ``runs`` (storage/columns.py)."""
        return COLUMN in self.shown

    @property
    def minimise(self) -> bool:
        return self.better == "lower"

    @property
    def is_metric(self) -> bool:
        """Shown and compared (everything but bookkeeping)."""
        return self.kind != "bookkeeping" and self.better is not None

    @property
    def display_unit(self) -> str:
        """The unit as shown: ``%`` for ratios, ``""`` for plain numbers."""
        return {"ratio": "%", "": ""}.get(self.unit, self.unit)

    @property
    def header(self) -> str:
        """Label with its unit, e.g. ``TTFT p50 [ms]``."""
        return f"{self.label} [{self.display_unit}]" if self.display_unit else self.label

    @property
    def hover_format(self) -> str:
        """A plotly/d3 number format for this metric's values (``.1%`` for ratios)."""
        return ".1%" if self.unit == "ratio" else ".4g"

    def value(self, metrics: JSONMapping | None, quality: JSONMapping | None = None) -> float | None:
        """This figure of a stored run (its ``metrics`` and ``quality`` dicts), a finite number or None."""
        metrics, quality = metrics or {}, quality or {}
        if self.read is not None:
            try:
                return finite(self.read(metrics, quality))
            except (TypeError, ValueError, KeyError, ZeroDivisionError):  # a run without what it is derived from
                return None
        if self.group is not None:
            stats = metrics.get(self.group)
            return finite(stats.get(self.stat)) if isinstance(stats, Mapping) else None
        if self.key.startswith("quality."):
            return finite(quality.get(self.key.removeprefix("quality.")))
        return finite(metrics.get(self.key))

    def format(self, value: float | None) -> str:
        """The value in this metric's display unit."""
        if value is None:
            return "–"
        if self.unit == "ratio":
            return f"{value:.1%}"
        if self.unit == "bytes":
            return human_bytes(value)
        if self.unit == "ms":
            return f"{value:.1f} ms" if abs(value) >= 10 else f"{value:.2f} ms"
        if self.unit in ("tok/s", "req/s"):
            return f"{value:.3g} {self.unit}" if abs(value) < 100 else f"{value:,.0f} {self.unit}"
        if self.unit == "s":
            return f"{value:.2f} s"
        if self.unit in ("J/token", "W"):
            return f"{value:.3g} {self.unit}"
        if abs(value) >= 10_000:
            return f"{value:,.0f}"
        if abs(value) >= 1:  # four digits, trailing zeros kept: 20.40 beside 20.35 (never 20.4), as a table's %.4g
            return f"{value:#.4g}".rstrip(".")
        return f"{value:.4g}"


N_TOO_SMALL = "n too small"  # a percentile the sample cannot support (engine.measure.stats.min_samples)


def bare_number(metric: Metric, value: float) -> str:
    """The value as :meth:`Metric.format` writes it, without its unit (``91.5`` for ``91.5 ms``)."""
    text = metric.format(value)
    unit = metric.display_unit
    return text.removesuffix(f" {unit}").removesuffix(unit) if unit and unit not in ("%", "GiB", "MiB") else text


def interval_text(metric: Metric, ci: object) -> str:
    """``90.2–92.9`` for a stored ``[lo, hi]``; ``""`` for none."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or finite(ci[0]) is None or finite(ci[1]) is None:
        return ""

    def compact(value: float) -> str:  # 4,531 rather than 4531.9: intervals sit in narrow columns
        return f"{value:,.0f}" if abs(value) >= 1000 and metric.unit != "bytes" else bare_number(metric, value)

    return f"{compact(float(ci[0]))}–{compact(float(ci[1]))}"


def format_with_ci(metric: Metric, value: float | None, ci: object = None, supported: bool = True) -> str:
    """``91.5 ms (95 % CI 90.2–92.9)``; ``n too small`` when the sample cannot support the figure."""
    if not supported:
        return N_TOO_SMALL
    span = interval_text(metric, ci)
    return metric.format(value) + (f" (95 % CI {span})" if span and value is not None else "")


def human_bytes(n: float | None) -> str:
    """``489.3 MiB``, ``1.2 GiB``: powers of 1024, labelled as such (a device's memory is shown in GiB too)."""
    if n is None:
        return "–"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def error_rate(metrics: JSONMapping | None, _quality: JSONMapping | None = None) -> float | None:
    """The share of measured requests that failed: ``metrics["error_rate"]``, else from the counts."""
    metrics = metrics or {}
    stored = finite(metrics.get("error_rate"))
    if stored is not None:
        return stored
    completed, failed = finite(metrics.get("completed")), finite(metrics.get("failed"))
    if completed is None or failed is None or completed + failed <= 0:
        return None
    return failed / (completed + failed)
