"""Compare runs with a baseline: metric ratios, a side-by-side table and a plain-language summary.

Works on any run-like object with ``id``, ``name``, ``status``, ``error``, ``model``,
``engine``, ``device``, ``spec``, ``metrics`` and ``quality`` (storage's RunDetail).
Missing metrics or accuracy never raise: they are left out of ratios and said in words.
Which figures are metrics, their labels, units and directions come from the metric
registry (:mod:`engine.measure.registry`); bookkeeping is never compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from engine.measure import registry
from engine.report.recipes import (
    changed_knobs,
    context_differences,
    recipe_in_words,
    run_label,
    spec_difference,
)
from engine.report.summary import SAME_WITHIN, summarize_against
from engine.report.values import flat_metrics, ratio, run_hints

__all__ = [
    "COMPARE_KEYS",
    "SAME_WITHIN",
    "Comparison",
    "changed_knobs",
    "compare_runs",
    "comparison_frame",
    "context_differences",
    "flat_metrics",
    "metric_label",
    "ratio",
    "recipe_in_words",
    "run_label",
    "spec_difference",
    "summarize_against",
]

# The speed, throughput and memory rows of the side-by-side table, in order (accuracy follows).
COMPARE_KEYS: tuple[str, ...] = (
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "e2el_ms_p50",
    "e2el_ms_p99",
    "output_tokens_per_s",
    "requests_per_s",
    "tokens_per_s_per_user",
    "output_tokens_per_s_per_gpu",
    "goodput_requests_per_s",
    "error_rate",
    "peak_memory_bytes",
    "weights_memory_bytes",
    "load_s",
)
_ACCURACY_ORDER = tuple(k for k, m in registry.REGISTRY.items() if m.kind == "accuracy")


def metric_label(key: str, task_kind: str | None = None) -> str:
    """A human label for a flat metric key (the registry's)."""
    return registry.label(key, task_kind)


@dataclass(frozen=True)
class Comparison:
    """Runs side by side: the baseline, per-run flat metrics, ratios to the baseline, summaries.

    ``hints`` maps task keys to their kind (the registry's unit/direction hint); ``differences``
    lists, per run, what differs from the baseline besides the recipe.
    """

    baseline_id: int
    run_ids: list[int]
    labels: dict[int, str]
    values: dict[int, dict[str, float | None]]
    ratios: dict[int, dict[str, float | None]]
    summaries: dict[int, str]
    hints: dict[str, str]
    differences: dict[int, list[str]]

    def metric_keys(self) -> list[str]:
        """Metrics shown: speed, throughput and memory, then every accuracy metric any run has."""
        quality = {k for v in self.values.values() for k in v if k.startswith("quality.")}
        ordered = sorted(quality, key=lambda k: (_ACCURACY_ORDER.index(k) if k in _ACCURACY_ORDER else 99, k))
        return registry.metric_keys([*COMPARE_KEYS, *ordered], hints=self.hints)


def compare_runs(runs: list[Any], baseline_id: int | None = None) -> Comparison:
    """Compare runs with the baseline (default: the first run)."""
    if not runs:
        raise ValueError("nothing to compare: no runs")
    by_id = {r.id: r for r in runs}
    if baseline_id is None or baseline_id not in by_id:
        baseline_id = runs[0].id
    base = by_id[baseline_id]
    values = {r.id: flat_metrics(r) for r in runs}
    ratios = {r.id: {k: ratio(values[r.id].get(k), values[baseline_id].get(k)) for k in values[r.id]} for r in runs}
    labels = {r.id: run_label(r, base) for r in runs}
    summaries = {r.id: summarize_against(r, base, labels[r.id]) for r in runs if r.id != baseline_id}
    hints: dict[str, str] = {}
    for r in runs:
        hints.update({k: v for k, v in run_hints(r).items() if k not in hints})
    differences = {r.id: context_differences(r, base) for r in runs if r.id != baseline_id}
    return Comparison(baseline_id, [r.id for r in runs], labels, values, ratios, summaries, hints, differences)


def comparison_frame(comparison: Comparison, formatted: bool = False) -> pd.DataFrame:
    """One row per metric; a value column per run and a ``÷ baseline`` ratio column for the others.

    ``formatted=False`` keeps numbers (CSV); ``True`` gives display strings. Bookkeeping
    (window, stride, token counts) never appears: only the registry's metrics do.
    """
    rows = []
    for key in comparison.metric_keys():
        if all(comparison.values[i].get(key) is None for i in comparison.run_ids):
            continue
        metric = registry.lookup(key, comparison.hints.get(key))
        row: dict[str, Any] = {"metric": metric.label, "unit": metric.display_unit, "better": metric.better}
        for run_id in comparison.run_ids:
            mark = " (baseline)" if run_id == comparison.baseline_id else ""
            value = comparison.values[run_id].get(key)
            row[f"#{run_id} {comparison.labels[run_id]}{mark}"] = metric.format(value) if formatted else value
            if run_id != comparison.baseline_id:
                r = comparison.ratios[run_id].get(key)
                row[f"#{run_id} ÷ baseline"] = ("–" if r is None else f"{r:.2f}x") if formatted else r
        rows.append(row)
    return pd.DataFrame(rows)
