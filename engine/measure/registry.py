"""The metric registry: every figure a run reports, declared once (:mod:`engine.measure.declarations`).

Each :class:`Metric` says its key, label, unit, which way is better, its kind (latency,
throughput, accuracy, memory, energy or bookkeeping), its display order, where it appears, its
interval rule and its computation or source. Every consumer (tables, Compare and its summary,
Explore's axes, the Pareto front, the SQL columns, exports, per-trial rows) asks the registry;
nobody guesses a direction from a name, and no consumer keeps its own list: :func:`shown_in`
gives the metrics of a place, in display order, each time it is asked (so a metric declared
later, e.g. by a test, appears everywhere but in the SQL schema, which is fixed at import).
Bookkeeping (window, stride, token counts, cache flags, stderr companions) is never shown or
compared as a metric.

Keys are *flat*: latency groups as ``<group>_<stat>`` (``ttft_ms_p50``), scalars by their
name (``output_tokens_per_s``) and accuracy figures as ``quality.<name>``
(``quality.perplexity``, ``quality.task:hellaswag``). Task figures take their unit and
direction from the task's primary metric (``quality.task:<name>:kind``, e.g.
``lm-eval word_perplexity,none``), which :func:`lookup` accepts as a hint. The result JSON
keeps DESIGN's nested groups (``{"tpot_ms": {"p50": ...}}``). Other spellings users typed
(``tpot_ms.p50``, ``tpot_p50``, ``tokens_per_s``) are read by :func:`canonical`, the one
normaliser.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from engine.jsonvalue import JSONMapping
from engine.measure.declarations import GROUPS, METRICS, STATS
from engine.measure.metric import (
    COLUMN,
    N_TOO_SMALL,
    PLACES,
    Better,
    Kind,
    Metric,
    bare_number,
    error_rate,
    finite,
    format_with_ci,
    human_bytes,
    interval_text,
)

__all__ = [
    "GROUPS",
    "GROUP_LABELS",
    "LATENCY_GROUPS",
    "N_TOO_SMALL",
    "PLACES",
    "REGISTRY",
    "STATS",
    "Better",
    "Kind",
    "Metric",
    "bare_number",
    "canonical",
    "declared",
    "error_rate",
    "finite",
    "format_with_ci",
    "human_bytes",
    "interval_text",
    "lookup",
    "shown_in",
]

LATENCY_GROUPS: tuple[str, ...] = tuple(g.key for g in GROUPS if g.headline)  # DESIGN's result-JSON groups
ALL_GROUPS: tuple[str, ...] = tuple(g.key for g in GROUPS)  # ... and client queueing: every group with intervals
GROUP_LABELS: dict[str, str] = {g.key: g.label for g in GROUPS}

# Every declared figure by key, in display order. Changed only through declare()/undeclare()
# (in place: modules holding a reference see every change).
REGISTRY: dict[str, Metric] = {}


def _rebuild(metrics: Iterable[Metric]) -> None:
    ordered = sorted(metrics, key=lambda m: m.order)
    REGISTRY.clear()
    REGISTRY.update((m.key, m) for m in ordered)


def declare(metric: Metric) -> None:
    """Add one declaration (a plugin or a test); ValueError for a key already declared or an unknown place."""
    if metric.key in REGISTRY:
        raise ValueError(f"metric {metric.key!r} is declared already")
    unknown = sorted(set(metric.shown) - set(PLACES))
    if unknown:
        raise ValueError(f"metric {metric.key!r}: unknown places {', '.join(unknown)} (known: {', '.join(PLACES)})")
    _rebuild([*REGISTRY.values(), metric])


def undeclare(key: str) -> None:
    """Remove a declaration added by :func:`declare`."""
    _rebuild(m for k, m in REGISTRY.items() if k != key)


@contextmanager
def declared(metric: Metric) -> Iterator[Metric]:
    """``metric`` declared for the duration of a ``with`` block (tests), removed afterwards."""
    declare(metric)
    try:
        yield metric
    finally:
        undeclare(metric.key)


_rebuild(METRICS)


def shown_in(place: str) -> list[Metric]:
    """The declared figures that appear in ``place`` (one of :data:`PLACES`), in display order."""
    if place not in PLACES:
        raise ValueError(f"unknown place {place!r}; known: {', '.join(PLACES)}")
    return [m for m in REGISTRY.values() if place in m.shown]


def keys_in(place: str) -> list[str]:
    """The keys of :func:`shown_in`."""
    return [m.key for m in shown_in(place)]


def stored_metrics() -> list[Metric]:
    """The metrics kept in their own SQL column of ``runs``, in display order."""
    return shown_in(COLUMN)


def computed() -> list[Metric]:
    """The figures computed from the measured phase's requests (those with a ``compute``), in display order."""
    return [m for m in REGISTRY.values() if m.compute is not None and m.group is None]


def with_interval(rules: tuple[str, ...] = ("mean", "bootstrap")) -> list[Metric]:
    """The scalar figures whose interval is made by one of ``rules`` from their per-request ``samples``."""
    return [m for m in REGISTRY.values() if m.group is None and m.interval in rules and m.samples is not None]


# -- one spelling of a key --------------------------------------------------------------------------
def _spellings() -> dict[str, str]:
    """Every other spelling users typed (lower case) -> its flat key."""
    out: dict[str, str] = {}
    for m in REGISTRY.values():
        names = list(m.aliases)
        if m.group is not None:
            bare = m.group.removesuffix("_ms")
            names += [f"{m.group}.{m.stat}", f"{bare}_{m.stat}", f"{bare}.{m.stat}"]
        out.update({name.lower(): m.key for name in (m.key, *names)})
    return out


def canonical(text: str) -> str:
    """The flat key of any spelling of a metric: ``tpot_ms.p50`` (until_metric, older suites),
    ``tpot_p50`` (objectives, SLO terms), ``TPOT_MS_P50``, an alias such as ``tokens_per_s``.

    Anything else is returned stripped and unchanged, for the caller to refuse in its own words
    (:func:`lookup` says whether it is a metric).
    """
    key = str(text).strip()
    if key in REGISTRY or key.startswith("quality.task:"):
        return key
    return _spellings().get(key.lower(), key)


# -- accuracy figures that are not declared one by one: task scores; the rest of quality is bookkeeping --
# lm-evaluation-harness primary metrics: (unit, better).
_TASK_METRICS: dict[str, tuple[str, Better]] = {
    "acc": ("ratio", "higher"),
    "acc_norm": ("ratio", "higher"),
    "exact_match": ("ratio", "higher"),
    "f1": ("ratio", "higher"),
    "mcc": ("", "higher"),
    "bleu": ("", "higher"),
    "rouge": ("", "higher"),
    "word_perplexity": ("", "lower"),
    "byte_perplexity": ("", "lower"),
    "bits_per_byte": ("", "lower"),
    "perplexity": ("", "lower"),
    "ter": ("", "lower"),
    "brier_score": ("", "lower"),
}
TASK_ORDER = 2500  # task scores sort after the declared accuracy figures

BOOKKEEPING = Metric("", "", "", None, "bookkeeping", order=10_000)


def task_metric(kind: str | None) -> tuple[str, Better]:
    """(unit, better) of a task's primary metric from its ``:kind`` text (local tasks: accuracy)."""
    name = (kind or "").removeprefix("lm-eval ").split(",")[0].strip()
    return _TASK_METRICS.get(name, ("ratio", "higher"))


def lookup(key: str, task_kind: str | None = None) -> Metric:
    """The metric behind a flat key; bookkeeping (``is_metric`` False) for anything else."""
    known = REGISTRY.get(key)
    if known is not None:
        return known
    if not key.startswith("quality."):
        return replace(BOOKKEEPING, key=key, label=key.replace("_", " "))
    name = key.removeprefix("quality.")
    if name.startswith("task:") and name.count(":") == 1:
        unit, better = task_metric(task_kind)
        label = name.removeprefix("task:") + ("" if unit == "ratio" else f" ({task_kind_name(task_kind)})")
        return Metric(key, label, unit, better, "accuracy", name.removeprefix("task:"), order=TASK_ORDER)
    # everything else under quality. (window, stride, counts, stderr companions, timings, notes) is bookkeeping
    return replace(BOOKKEEPING, key=key, label=name.replace("_", " "))


def display_rank(key: str) -> tuple[int, str]:
    """A sort key in display order (declared figures by their order, tasks after them, then the rest)."""
    return lookup(key).order, key


def task_kind_name(kind: str | None) -> str:
    return (kind or "").removeprefix("lm-eval ").split(",")[0].strip() or "accuracy"


def is_metric(key: str, task_kind: str | None = None) -> bool:
    return lookup(key, task_kind).is_metric


def minimise(key: str, task_kind: str | None = None) -> bool:
    """Whether smaller is better for a metric key (raises for bookkeeping: it has no direction)."""
    metric = lookup(key, task_kind)
    if metric.better is None:
        raise KeyError(f"{key!r} is not a metric (bookkeeping has no direction)")
    return metric.minimise


def label(key: str, task_kind: str | None = None) -> str:
    return lookup(key, task_kind).label


def header(key: str, task_kind: str | None = None) -> str:
    return lookup(key, task_kind).header


def metric_keys(
    keys: Iterable[str],
    kinds: tuple[Kind, ...] | None = None,
    hints: Mapping[str, str] | None = None,
) -> list[str]:
    """The keys among ``keys`` that are metrics (optionally of some kinds), in the given order.

    ``hints`` maps a task key (``quality.task:NAME``) to its kind text (see :func:`task_kinds`).
    """
    out = []
    for key in keys:
        metric = lookup(key, (hints or {}).get(key))
        if metric.is_metric and (kinds is None or metric.kind in kinds):
            out.append(key)
    return out


def task_kinds(quality: JSONMapping | None, prefix: str = "quality.") -> dict[str, str]:
    """``{"quality.task:NAME": kind}`` from a quality dict's ``task:NAME:kind`` entries (the lookup hints)."""
    out: dict[str, str] = {}
    for key, value in (quality or {}).items():
        if key.startswith("task:") and key.endswith(":kind") and key.count(":") == 2 and isinstance(value, str):
            out[prefix + key.removesuffix(":kind")] = value
    return out


def accuracy_metrics(quality: JSONMapping | None) -> dict[str, float]:
    """The accuracy *metrics* of a quality dict as flat ``quality.<name>`` keys; bookkeeping left out."""
    hints = task_kinds(quality)
    out: dict[str, float] = {}
    for name, value in (quality or {}).items():
        key = f"quality.{name}"
        number = finite(value)
        if number is not None and lookup(key, hints.get(key)).is_metric:
            out[key] = number
    return out


def figures(metrics: JSONMapping | None, quality: JSONMapping | None = None) -> dict[str, float | None]:
    """A stored run's figures as flat keys: every declared metric (accuracy ones when measured) and its tasks."""
    flat: dict[str, float | None] = {}
    for metric in REGISTRY.values():
        if metric.is_metric:
            value = metric.value(metrics, quality)
            if value is not None or metric.kind != "accuracy":
                flat[metric.key] = value
    flat.update(accuracy_metrics(quality))
    return flat


def failure_words(metrics: JSONMapping | None) -> str | None:
    """``"1 of 4 requests failed (25 %)"``, or None when none failed or nothing is known."""
    rate = error_rate(metrics)
    if not rate:
        return None
    completed, failed = finite((metrics or {}).get("completed")), finite((metrics or {}).get("failed"))
    if completed is not None and failed is not None:
        return f"{int(failed)} of {int(completed + failed)} requests failed ({rate:.0%})"
    return f"{rate:.0%} of requests failed"
