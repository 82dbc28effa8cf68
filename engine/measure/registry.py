"""The metric registry: every figure a run reports, declared once.

Each :class:`Metric` says its key, label, unit, which way is better and its kind
(latency, throughput, accuracy, memory, energy or bookkeeping). Every consumer (tables,
Compare and its summary, Explore's axes, the Pareto front, exports) asks the registry;
nobody guesses a direction from a name. Bookkeeping (window, stride, token counts, cache
flags, stderr companions) is never shown or compared as a metric.

Keys are *flat*: latency groups as ``<group>_<stat>`` (``ttft_ms_p50``), scalars by their
name (``output_tokens_per_s``) and accuracy figures as ``quality.<name>``
(``quality.perplexity``, ``quality.task:hellaswag``). Task figures take their unit and
direction from the task's primary metric (``quality.task:<name>:kind``, e.g.
``lm-eval word_perplexity,none``), which :func:`lookup` accepts as a hint.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

Better = Literal["lower", "higher"]
Kind = Literal["latency", "throughput", "accuracy", "memory", "energy", "bookkeeping"]

LATENCY_GROUPS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
STATS: tuple[str, ...] = ("mean", "p50", "p90", "p95", "p99")
GROUP_LABELS: dict[str, str] = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT (GenAI-Perf/AIPerf: ITL)",
    "itl_ms": "ITL (AIPerf: ICL)",
    "e2el_ms": "E2EL",
    "queue_ms": "client queueing",
}
_GROUP_SHORT = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2el_ms": "E2EL", "queue_ms": "queueing"}


@dataclass(frozen=True)
class Metric:
    """One reported figure: how to name it, in what unit, and which way is better."""

    key: str
    label: str
    unit: str  # "ms", "tok/s", "req/s", "bytes", "s", "nats", "ratio" (0..1, shown as %), "" (plain number)
    better: Better | None  # None: no direction (bookkeeping)
    kind: Kind
    short: str = ""  # a short header for narrow tables; the label when empty
    vs_reference: bool = False  # measured against the reference recipe (KL, top-1, flips), not the baseline
    stored_column: bool = False  # also kept in its own SQL column of ``runs`` (storage/columns.py): listed without JSON

    @property
    def column(self) -> str:
        """The SQL column name of a stored metric: the key with ``.`` as ``_`` (``quality_perplexity``)."""
        return self.key.replace(".", "_")

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
        return f"{value:.4g}"


N_TOO_SMALL = "n too small"  # a percentile the sample cannot support (engine.measure.stats.min_samples)


def bare_number(metric: Metric, value: float) -> str:
    """The value as :meth:`Metric.format` writes it, without its unit (``91.5`` for ``91.5 ms``)."""
    text = metric.format(value)
    unit = metric.display_unit
    return text.removesuffix(f" {unit}").removesuffix(unit) if unit and unit not in ("%", "GB", "MB") else text


def interval_text(metric: Metric, ci: Any) -> str:
    """``90.2–92.9`` for a stored ``[lo, hi]``; ``""`` for none."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or finite(ci[0]) is None or finite(ci[1]) is None:
        return ""

    def compact(value: float) -> str:  # 4,531 rather than 4531.9: intervals sit in narrow columns
        return f"{value:,.0f}" if abs(value) >= 1000 and metric.unit != "bytes" else bare_number(metric, value)

    return f"{compact(float(ci[0]))}–{compact(float(ci[1]))}"


def format_with_ci(metric: Metric, value: float | None, ci: Any = None, supported: bool = True) -> str:
    """``91.5 ms (95 % CI 90.2–92.9)``; ``n too small`` when the sample cannot support the figure."""
    if not supported:
        return N_TOO_SMALL
    span = interval_text(metric, ci)
    return metric.format(value) + (f" (95 % CI {span})" if span and value is not None else "")


def human_bytes(n: float | None) -> str:
    """``1.2 GB`` style (powers of 1024, labelled GB as most tools do)."""
    if n is None:
        return "–"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"


def _scalars() -> dict[str, Metric]:
    rows: list[Metric] = [
        Metric("output_tokens_per_s", "output tokens/s", "tok/s", "higher", "throughput", "tok/s"),
        Metric("requests_per_s", "requests/s", "req/s", "higher", "throughput", "req/s"),
        Metric("tokens_per_s_per_user", "tokens/s per user (1/TPOT)", "tok/s", "higher", "throughput", "tok/s/user"),
        Metric("output_tokens_per_s_per_gpu", "output tokens/s per GPU", "tok/s", "higher", "throughput", "tok/s/GPU"),
        Metric(
            "goodput_requests_per_s",
            "goodput (requests/s meeting every SLO)",
            "req/s",
            "higher",
            "throughput",
            "goodput",
        ),
        Metric("goodput_fraction", "share of requests meeting every SLO", "ratio", "higher", "throughput", "SLO met"),
        Metric("error_rate", "failed requests", "ratio", "lower", "throughput", "failed"),
        Metric("peak_memory_bytes", "peak memory (measured phase)", "bytes", "lower", "memory", "peak mem"),
        Metric("weights_memory_bytes", "weights memory (as loaded)", "bytes", "lower", "memory", "weights"),
        Metric("load_s", "model load time", "s", "lower", "latency", "load"),
        # engine/measure/energy.py: NVML energy counter (GPU) or RAPL (CPU package); None with a reason otherwise
        Metric("energy_per_output_token_j", "energy per output token", "J/token", "lower", "energy", "J/tok"),
        Metric("avg_power_w", "average power (measured phase)", "W", "lower", "energy", "power"),
    ]
    return {m.key: m for m in rows}


def _latency() -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for group in (*LATENCY_GROUPS, "queue_ms"):
        for stat in STATS:
            key = f"{group}_{stat}"
            label = f"{_GROUP_SHORT[group]} {stat}" + (" (GenAI-Perf: ITL)" if group == "tpot_ms" else "")
            out[key] = Metric(key, label, "ms", "lower", "latency", f"{_GROUP_SHORT[group]} {stat}")
    return out


_QUALITY: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("quality.perplexity", "perplexity", "", "lower", "accuracy", "ppl"),
        Metric("quality.kl_mean", "KL mean vs reference", "nats", "lower", "accuracy", "KL", True),
        Metric("quality.kl_p99", "KL p99 vs reference", "nats", "lower", "accuracy", "KL p99", True),
        Metric("quality.top1_agreement", "top-1 agreement vs reference", "ratio", "higher", "accuracy", "top-1", True),
        Metric(
            "quality.greedy_flip_rate", "greedy flip rate vs reference", "ratio", "lower", "accuracy", "flips", True
        ),
    )
}
# Accuracy bookkeeping: counts, settings, companions of a figure. Never a metric.
_QUALITY_BOOKKEEPING_EXACT = frozenset(
    {
        "baseline_perplexity",
        "baseline_key",
        "baseline_cached",
        "corpus",
        "corpus_tokens",
        "window",
        "stride",
        "kl_positions",
        "kl_top_k",
        "nll_mean",
        "nll_stderr",
        "perplexity_tokens",
        "greedy_flip_tokens",
        "greedy_flip_prompts",
        "quality_s",
        "calibration",
    }
)
_QUALITY_BOOKKEEPING_SUFFIXES = ("_stderr", ":stderr", ":n", ":kind", ":metric", "_s")

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

REGISTRY: dict[str, Metric] = {**_latency(), **_scalars(), **_QUALITY}
# Every headline figure but client queueing is also an SQL column of runs: pages list, filter and sort 100,000 runs by them.
REGISTRY = {k: replace(m, stored_column=not k.startswith("queue_ms")) for k, m in REGISTRY.items()}


def stored_metrics() -> list[Metric]:
    """The metrics kept in their own SQL column of ``runs``, in registry order."""
    return [m for m in REGISTRY.values() if m.stored_column]


BOOKKEEPING = Metric("", "", "", None, "bookkeeping")


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
        return Metric(key, label, unit, better, "accuracy", name.removeprefix("task:"))
    # everything else under quality. (window, stride, counts, stderr companions, timings, notes) is bookkeeping
    return replace(BOOKKEEPING, key=key, label=name.replace("_", " "))


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


def task_kinds(quality: Mapping[str, Any] | None, prefix: str = "quality.") -> dict[str, str]:
    """``{"quality.task:NAME": kind}`` from a quality dict's ``task:NAME:kind`` entries (the lookup hints)."""
    out: dict[str, str] = {}
    for key, value in (quality or {}).items():
        if key.startswith("task:") and key.endswith(":kind") and key.count(":") == 2 and isinstance(value, str):
            out[prefix + key.removesuffix(":kind")] = value
    return out


def finite(value: Any) -> float | None:
    """A finite float, or None (missing, text, bool, NaN, inf)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def quality_metrics(quality: Mapping[str, Any] | None) -> dict[str, float]:
    """The accuracy *metrics* of a quality dict as flat ``quality.<name>`` keys; bookkeeping left out."""
    hints = task_kinds(quality)
    out: dict[str, float] = {}
    for name, value in (quality or {}).items():
        key = f"quality.{name}"
        number = finite(value)
        if number is not None and lookup(key, hints.get(key)).is_metric:
            out[key] = number
    return out


def error_rate(metrics: Mapping[str, Any] | None) -> float | None:
    """The share of measured requests that failed: ``metrics["error_rate"]``, else from the counts."""
    metrics = metrics or {}
    stored = finite(metrics.get("error_rate"))
    if stored is not None:
        return stored
    completed, failed = finite(metrics.get("completed")), finite(metrics.get("failed"))
    if completed is None or failed is None or completed + failed <= 0:
        return None
    return failed / (completed + failed)


def failure_words(metrics: Mapping[str, Any] | None) -> str | None:
    """``"1 of 4 requests failed (25 %)"``, or None when none failed or nothing is known."""
    rate = error_rate(metrics)
    if not rate:
        return None
    completed, failed = finite((metrics or {}).get("completed")), finite((metrics or {}).get("failed"))
    if completed is not None and failed is not None:
        return f"{int(failed)} of {int(completed + failed)} requests failed ({rate:.0%})"
    return f"{rate:.0%} of requests failed"


# The headline scalars of a result object, in display order (a metric is listed once it is measured).
SCALARS: tuple[str, ...] = (
    "output_tokens_per_s",
    "requests_per_s",
    "tokens_per_s_per_user",
    "output_tokens_per_s_per_gpu",
    "goodput_requests_per_s",
    "weights_memory_bytes",
    "peak_memory_bytes",
    "weights_memory_bytes",
    "load_s",
    "energy_per_output_token_j",
    "avg_power_w",
)
