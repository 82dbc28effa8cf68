"""Compare runs with a baseline: metric ratios, a side-by-side table and a plain-language summary.

Works on any run-like object with ``id``, ``name``, ``status``, ``error``, ``model``,
``engine``, ``device``, ``spec``, ``metrics`` and ``quality`` (storage's RunDetail).
Missing metrics or accuracy never raise: they are left out of ratios and said in words.
Which figures are metrics, their labels, units and directions come from the metric
registry (:mod:`engine.measure.registry`); bookkeeping is never compared.

With the runs' raw requests (``requests={run_id: [RequestRecord, ...]}``) every ratio gets
a bootstrap interval and a verdict (:mod:`engine.report.verdicts`); without them the stored
intervals give approximate ones. The table (``comparison_frame``) adds per run a 95 % CI
column of its value and, for each run but the baseline, the ratio's interval and verdict.

A pair with a predicted run (the serving simulator's) gets no verdict but its plain ratio (a simulation has no
sampling noise); with one predicted and one measured, ``predictions`` holds the prediction's check against the
measurement (:mod:`engine.report.predicted`: each headline figure's error beside the band), and the CSV adds each
predicted run's band and calibration label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from engine.jsonvalue import JSONMapping
from engine.measure import registry
from engine.report.decision import Decision, decision_line
from engine.report.naming import default_baseline, run_name
from engine.report.predicted import PairCheck, band_pct, other_differences, pair_check, prediction_of
from engine.report.recipes import (
    changed_recipe_knobs,
    context_differences,
    recipe_in_words,
    run_label,
    spec_difference,
)
from engine.report.runlike import is_predicted
from engine.report.summary import SAME_WITHIN, summarize_against
from engine.report.values import flat_metrics, flat_supported, interval, ratio, run_hints, with_intervals
from engine.report.verdict_words import ratio_words, table_words
from engine.report.verdicts import Verdict, run_samples, verdicts_between

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord
    from engine.measure.registry import Metric
    from engine.report.runlike import RunLike

__all__ = [
    "SAME_WITHIN",
    "Comparison",
    "changed_recipe_knobs",
    "compare_runs",
    "comparison_frame",
    "context_differences",
    "default_baseline",
    "flat_metrics",
    "metric_label",
    "ratio",
    "recipe_in_words",
    "run_label",
    "run_name",
    "spec_difference",
    "summarize_against",
]
Cell = str | float | None  # one cell of the side-by-side table


def compare_keys(present: Iterable[str] = (), hints: Mapping[str, str] | None = None) -> list[str]:
    """The rows of the side-by-side table: the registry's Compare figures (speed, throughput, memory,
    energy) in display order, then the accuracy figures among ``present`` (the runs' keys), declared
    ones in display order and task scores after them. Asked of the registry each time."""
    speed = [m.key for m in registry.shown_in("compare") if m.kind != "accuracy"]
    accuracy = set()
    for key in present:
        metric = registry.lookup(key, (hints or {}).get(key))
        if metric.kind == "accuracy" and (key not in registry.REGISTRY or "compare" in metric.shown):  # or a task
            accuracy.add(key)
    return registry.metric_keys([*speed, *sorted(accuracy, key=registry.display_rank)], hints=hints)


def metric_label(key: str, task_kind: str | None = None) -> str:
    """A human label for a flat metric key (the registry's)."""
    return registry.label(key, task_kind)


@dataclass(frozen=True)
class Comparison:
    """Runs side by side: the baseline, per-run flat metrics, ratios to the baseline, summaries.

    ``hints`` maps task keys to their kind (the registry's unit/direction hint); ``differences``
    lists, per run, what differs from the baseline besides the recipe. ``intervals`` holds each
    run's stored ``[lo, hi]`` per key, ``supported`` False where the sample is too small for the
    figure ("n too small"), ``verdicts`` each non-baseline run's verdict per key, ``decisions`` its
    decision line (:mod:`engine.report.decision`), ``predictions`` its check as a prediction against a measurement
    (or the other way round) where exactly one of the pair is predicted; ``predicted`` the predicted runs and
    their ``provenance["prediction"]``.
    """

    baseline_id: int
    run_ids: list[int]
    labels: dict[int, str]
    values: dict[int, dict[str, float | None]]
    ratios: dict[int, dict[str, float | None]]
    summaries: dict[int, str]
    hints: dict[str, str]
    differences: dict[int, list[str]]
    intervals: dict[int, dict[str, list[float] | None]] = field(default_factory=dict)
    supported: dict[int, dict[str, bool]] = field(default_factory=dict)
    verdicts: dict[int, dict[str, Verdict]] = field(default_factory=dict)
    decisions: dict[int, Decision] = field(default_factory=dict)
    predictions: dict[int, PairCheck] = field(default_factory=dict)
    predicted: dict[int, JSONMapping] = field(default_factory=dict)

    def metric_keys(self) -> list[str]:
        """Metrics shown: speed, throughput and memory, then every accuracy metric any run has."""
        return compare_keys({k for v in self.values.values() for k in v}, self.hints)


def compare_runs(
    runs: Sequence[RunLike],
    baseline_id: int | None = None,
    requests: Mapping[int, Sequence[RequestRecord]] | None = None,
) -> Comparison:
    """Compare runs with the baseline (default: :func:`engine.report.naming.default_baseline`, the run at its
    engine's defaults, else the fewest changed knobs, else the oldest); ``requests`` by run id give verdicts."""
    if not runs:
        raise ValueError("nothing to compare: no runs")
    by_id = {r.id: r for r in runs}
    if baseline_id is None or baseline_id not in by_id:
        baseline_id = default_baseline(runs).id
    base = by_id[baseline_id]
    values = {r.id: flat_metrics(r) for r in runs}
    ratios = {r.id: {k: ratio(values[r.id].get(k), values[baseline_id].get(k)) for k in values[r.id]} for r in runs}
    labels = {r.id: run_name(r) for r in runs}  # one name per run everywhere (engine/report/naming.py)
    hints: dict[str, str] = {}
    for r in runs:
        hints.update({k: v for k, v in run_hints(r).items() if k not in hints})
    requests = requests or {}
    stored = {r.id: with_intervals(r.metrics, requests.get(r.id)) for r in runs}
    samples = {r.id: run_samples(requests.get(r.id), (r.metrics or {}).get("duration_s")) for r in runs}
    keys = compare_keys({k for r in runs for k in values[r.id]}, hints)
    verdicts = {
        r.id: verdicts_between(
            base, r, keys, (values[baseline_id], values[r.id]), (samples[baseline_id], samples[r.id]), hints
        )
        for r in runs
        if r.id != baseline_id and r.status == "done" and base.status == "done"
    }
    summaries = {
        r.id: summarize_against(r, base, labels[r.id], verdicts.get(r.id)) for r in runs if r.id != baseline_id
    }
    differences = {r.id: other_differences(r, base, context_differences(r, base)) for r in runs if r.id != baseline_id}
    decisions = {
        r.id: decision_line(r, base, verdicts.get(r.id, {}), labels[r.id]) for r in runs if r.id != baseline_id
    }
    intervals = {r.id: {k: interval(stored[r.id], k) for k in keys} for r in runs}
    support = {r.id: {k: flat_supported(stored[r.id], k) for k in keys} for r in runs}
    checked = {r.id: pair_check(r, base) for r in runs if r.id != baseline_id}
    return Comparison(
        baseline_id, [r.id for r in runs], labels, values, ratios, summaries, hints, differences,
        intervals, support, verdicts, decisions, {i: c for i, c in checked.items() if c is not None},
        {r.id: prediction_of(r) for r in runs if is_predicted(r)},
    )  # fmt: skip


def _value_cells(comparison: Comparison, run_id: int, key: str, metric: Metric, formatted: bool) -> dict[str, Cell]:
    name = comparison.labels[run_id] + (" (baseline)" if run_id == comparison.baseline_id else "")
    value = comparison.values[run_id].get(key)
    ok = comparison.supported.get(run_id, {}).get(key, True)
    ci = comparison.intervals.get(run_id, {}).get(key)
    if formatted and run_id in comparison.predicted:  # a prediction's error is its band, not its requests' sampling
        pct = band_pct(comparison.predicted[run_id], key)
        return {
            name: metric.format(value) if ok else registry.N_TOO_SMALL,
            f"#{run_id} band (predicted)": "no band claimed" if pct is None else f"±{pct:.2g} %",
        }
    if formatted:
        return {
            name: metric.format(value) if ok else registry.N_TOO_SMALL,
            f"#{run_id} 95 % CI": registry.interval_text(metric, ci) if ok else "",
        }
    lo, hi = ci if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None)
    return {name: value if ok else None, f"#{run_id} CI low": lo, f"#{run_id} CI high": hi}


def _ratio_cells(comparison: Comparison, run_id: int, key: str, formatted: bool) -> dict[str, Cell]:
    both = (comparison.supported.get(i, {}).get(key, True) for i in (run_id, comparison.baseline_id))
    r = comparison.ratios[run_id].get(key) if all(both) else None  # no ratio of figures that are "n too small"
    verdict = comparison.verdicts.get(run_id, {}).get(key)
    iv = None if verdict is None else verdict.interval
    if formatted:
        return {f"#{run_id} ÷ baseline": ratio_words(r, verdict), f"#{run_id} verdict": table_words(verdict)}
    return {
        f"#{run_id} ÷ baseline": r,
        f"#{run_id} ratio CI low": None if iv is None else iv.lo,
        f"#{run_id} ratio CI high": None if iv is None else iv.hi,
        f"#{run_id} verdict": None if verdict is None else verdict.state,
    }


def _prediction_cells(comparison: Comparison, run_id: int, key: str, formatted: bool) -> dict[str, Cell]:
    """A predicted run's CSV cells for a figure: marked predicted, its band, its error against the measured run it
    is checked with, its calibration label; nothing for a measured run or a formatted table (its band replaces the
    CI there: :func:`_value_cells`)."""
    prediction = comparison.predicted.get(run_id)
    if prediction is None or formatted:
        return {}
    pct = band_pct(prediction, key)
    pair = next((p for p in comparison.predictions.values() if p.predicted_id == run_id), None)
    check = next((c for c in pair.checks if c.key == key), None) if pair else None
    return {
        f"#{run_id} predicted": True,
        f"#{run_id} band ±%": pct,
        f"#{run_id} error vs measured %": None if check is None else check.error * 100,
        f"#{run_id} prediction": str(prediction.get("label") or ""),
    }


def comparison_frame(comparison: Comparison, formatted: bool = False) -> pd.DataFrame:
    """One row per metric; per run (the baseline first) its value and 95 % CI, and for the others the ratio,
    its CI and a verdict.

    A predicted run shows its band per figure instead of a CI (``±10 %``; unformatted, beside its CI bounds:
    ``#N predicted``, ``#N band ±%``, ``#N error vs measured %`` and ``#N prediction``, its calibration label). ``formatted=False`` keeps numbers (CSV: a percentile the sample cannot support is empty,
    its CI too; verdict states ``better``/``worse``/``same``/``unclear``/``thin``/``none``); ``True`` gives
    display strings ("n too small", ``1.75× (95 % CI 1.62–1.88)``, "worse (significant)", the words of
    :mod:`engine.report.verdict_words`; memory cells carry their own KiB/MiB/GiB, so no unit). Bookkeeping
    (window, stride, token counts) never appears: only the registry's metrics do.
    """
    rows = []
    for key in comparison.metric_keys():
        if all(comparison.values[i].get(key) is None for i in comparison.run_ids):
            continue
        metric = registry.lookup(key, comparison.hints.get(key))
        unit = "" if formatted and metric.unit == "bytes" else metric.display_unit  # each cell says KiB, MiB or GiB
        row: dict[str, Cell] = {"metric": metric.label, "unit": unit, "better": metric.better}
        baseline_first = sorted(comparison.run_ids, key=lambda i: i != comparison.baseline_id)  # stable
        for run_id in baseline_first:
            row.update(_value_cells(comparison, run_id, key, metric, formatted))
            row.update(_prediction_cells(comparison, run_id, key, formatted))
            if run_id != comparison.baseline_id:
                row.update(_ratio_cells(comparison, run_id, key, formatted))
        rows.append(row)
    return pd.DataFrame(rows)
