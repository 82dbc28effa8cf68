"""Is a difference between two runs real? A verdict per metric, from the runs' raw samples.

Rules (95 %, :mod:`engine.measure.stats`):

- **Latency percentiles** (``tpot_ms_p50`` ...): the ratio new / baseline of the percentile
  with a seeded bootstrap interval over each run's per-request samples (ITL: pooled gaps)
  by :func:`engine.measure.stats.ratio_ci`. Significant when the interval excludes 1.
  Too few samples for the percentile in either run (p50 needs 6, p90 29, p99 299): "too
  few requests to tell", never a claim. Means: the same with the mean.
- **Throughput**: output tokens/s and requests/s by a bootstrap over requests of
  (tokens, duration share) per run (see :mod:`engine.measure.metrics`); tokens/s per user
  from the per-request 1/TPOT. At least 6 requests per run. A figure follows its declared
  interval rule (:mod:`engine.measure.declarations`).
- **Without raw samples** (requests not loaded or not stored) the two figures' stored
  intervals give an approximate interval (:func:`engine.measure.stats.ratio_from_intervals`);
  a figure with no interval gets no verdict ("no interval").
- **Accuracy, paired** (:mod:`engine.report.paired`): runs that scored the same text (their
  ``perplexity_blocks`` digests agree) get the perplexity ratio with a paired block-bootstrap
  interval, significant when it excludes 1; local tasks scored on the same examples get the mean
  paired difference, significant beyond 2 standard errors of it.
- **Accuracy, unpaired** (runs stored before per-block NLL, other corpora, lm-eval tasks): the
  difference with its standard error, the two runs' errors added in quadrature
  (``perplexity_stderr``, ``kl_stderr``, ``top1_agreement_stderr``, ``task:NAME:stderr``); within
  2 standard errors is "no significant change". Conservative: it ignores what both runs share.
  ``Verdict.paired`` says which one was used.

With one trial per run these are within-run intervals: drift between runs on a noisy
machine is not in them. Runs with several trials are judged on their stored intervals,
which include the spread across trials (engine.run.repeats.widen_with_repeats).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from engine.measure import registry, stats
from engine.measure.stamps import Phase
from engine.report.paired import perplexity_ratio, task_difference
from engine.report.values import interval, sample_count

State = Literal["better", "worse", "same", "thin", "none"]
STDERR_MULTIPLE = 2.0  # an accuracy change within this many standard errors is "no significant change"


@dataclass(frozen=True)
class Verdict:
    """One metric of a run against the baseline.

    ``state``: ``better`` / ``worse`` (significant, in the metric's direction), ``same`` (no
    significant difference), ``thin`` (too little evidence; ``reason`` says why) or ``none``
    (nothing to judge by: no interval or no standard error).
    """

    key: str
    ratio: float | None
    interval: stats.Interval | None = None
    state: State = "none"
    reason: str = ""
    delta: float | None = None  # accuracy: new - baseline
    stderr: float | None = None  # accuracy: of the difference
    paired: bool | None = None  # accuracy: judged on paired differences (True) or two runs' errors (False)

    @property
    def significant(self) -> bool:
        return self.state in ("better", "worse")

    def span(self) -> str:
        """``1.62–1.88`` (the ratio's interval), or ``""``."""
        return "" if self.interval is None else f"{self.interval.lo:.2f}–{self.interval.hi:.2f}"

    def short(self) -> str:
        """A table cell: ``significantly better``, ``no significant difference``, ``too few requests (n=4; ...)``."""
        if self.state in ("better", "worse"):
            return f"significantly {self.state}"
        if self.state == "same":
            return "no significant change" if self.delta is not None else "no significant difference"
        if self.state == "thin":
            return f"too few ({self.reason.replace('; ', ', ')})"
        return self.reason or "–"


@dataclass(frozen=True)
class Samples:
    """A run's raw samples for verdicts: each latency group's, and each scalar's by its declared
    interval rule (``mean``: one value per request; ``bootstrap``: rows of (amount, duration share))."""

    groups: dict[str, np.ndarray]
    scalars: dict[str, np.ndarray]


def run_samples(requests: Sequence[Any] | None, duration_s: float | None) -> Samples | None:
    """The samples behind a run's figures (None without requests)."""
    if not requests:
        return None
    phase = Phase(requests, float(duration_s or 0.0))
    groups = {g.key: np.asarray(g.samples(phase), dtype=float) for g in registry.GROUPS}
    scalars = {}
    for metric in registry.with_interval():
        values = metric.samples(phase) if metric.samples is not None else None
        if values is not None:
            scalars[metric.key] = np.asarray(values, dtype=float)
    return Samples(groups, scalars)


def _seed(key: str) -> int:
    return zlib.crc32(key.encode())


def _direction(key: str, ratio: stats.Ratio, hints: Mapping[str, str] | None = None) -> State:
    if ratio.interval is None:
        return "none"
    if not ratio.significant:
        return "same"
    lower = registry.minimise(key, (hints or {}).get(key))
    return "better" if (ratio.value < 1) == lower else "worse"


def _group_stat(key: str) -> tuple[str, str] | None:
    metric = registry.lookup(key)
    return None if metric.group is None or metric.stat is None else (metric.group, metric.stat)


def _latency_ratio(stat: str, base: np.ndarray, new: np.ndarray, key: str) -> stats.Ratio | str | None:
    """The ratio, or the reason there can be none (``n=4; p50 needs 6``)."""
    if stat == "mean":
        return stats.statistic_ratio_ci(base[:, None], new[:, None], stats.column_mean, seed=_seed(key))
    q = float(stat.removeprefix("p"))
    need = stats.min_samples(q)
    n = min(base.size, new.size)
    if 0 < n < need:
        return f"n={n}; {stat} needs {need}"
    return stats.ratio_ci(base, new, q, seed=_seed(key))


def _from_samples(key: str, base: Samples, new: Samples) -> stats.Ratio | str | None:
    parsed = _group_stat(key)
    if parsed is not None:
        group, stat = parsed
        return _latency_ratio(stat, base.groups.get(group, np.empty(0)), new.groups.get(group, np.empty(0)), key)
    rule = registry.lookup(key).interval
    if rule == "mean" and key in base.scalars and key in new.scalars:
        return stats.statistic_ratio_ci(
            base.scalars[key][:, None], new.scalars[key][:, None], stats.column_mean, seed=_seed(key)
        )
    if rule == "bootstrap":
        if key not in base.scalars or key not in new.scalars:
            return "fewer than 6 requests"
        return stats.statistic_ratio_ci(base.scalars[key], new.scalars[key], stats.sum_ratio, seed=_seed(key))
    return None


def _thin_from_counts(key: str, base_metrics: Mapping[str, Any], new_metrics: Mapping[str, Any]) -> str | None:
    parsed = _group_stat(key)
    if parsed is None or parsed[1] == "mean":
        return None
    group, stat = parsed
    counts = [sample_count(m, group) for m in (base_metrics, new_metrics)]
    need = stats.min_samples(float(stat.removeprefix("p")))
    known = [c for c in counts if c is not None]
    return f"n={min(known)}; {stat} needs {need}" if known and min(known) < need else None


def _has_trials(metrics: Mapping[str, Any]) -> bool:
    """Several trials: the stored intervals include the spread across them (engine.run.repeats)."""
    return len(metrics.get("trials") or []) > 1


def speed_verdict(
    key: str,
    base_value: float | None,
    new_value: float | None,
    base_metrics: Mapping[str, Any] | None,
    new_metrics: Mapping[str, Any] | None,
    samples: tuple[Samples | None, Samples | None] = (None, None),
) -> Verdict:
    """The verdict on a latency or throughput figure (module doc); ``samples`` = (baseline, run)."""
    base_metrics, new_metrics = base_metrics or {}, new_metrics or {}
    plain = None if base_value in (None, 0) or new_value is None else new_value / base_value
    base_s, new_s = samples
    if _has_trials(base_metrics) or _has_trials(new_metrics):
        base_s = new_s = None  # per-request resamples ignore drift between trials: use the stored intervals
    found = _from_samples(key, base_s, new_s) if base_s is not None and new_s is not None else None
    if found is None:
        thin = _thin_from_counts(key, base_metrics, new_metrics)
        if thin:
            return Verdict(key, plain, state="thin", reason=thin)
        found = stats.ratio_from_intervals(
            base_value,
            stats.from_pair(interval(base_metrics, key)),
            new_value,
            stats.from_pair(interval(new_metrics, key)),
        )
    if isinstance(found, str):
        return Verdict(key, plain, state="thin", reason=found)
    if found is None or found.interval is None:
        return Verdict(key, plain, state="none", reason="no interval")
    return Verdict(key, found.value, found.interval, _direction(key, found))


_STDERR_KEYS = {"kl_mean": "kl_stderr"}  # the accuracy figures whose standard error is stored under another name


def _stderr(quality: Mapping[str, Any] | None, key: str) -> float | None:
    name = key.removeprefix("quality.")
    quality = quality or {}
    stored = quality.get(_STDERR_KEYS.get(name, f"{name}_stderr"), quality.get(f"{name}:stderr"))
    return registry.finite(stored)


def accuracy_verdict(
    key: str,
    base_value: float | None,
    new_value: float | None,
    base_quality: Mapping[str, Any] | None,
    new_quality: Mapping[str, Any] | None,
    hints: Mapping[str, str] | None = None,
) -> Verdict:
    """An accuracy change: paired where both runs scored the same text or examples, else against
    the two runs' standard errors (module doc)."""
    if base_value is None or new_value is None:
        return Verdict(key, None, state="none")
    plain = None if base_value == 0 else new_value / base_value
    delta = new_value - base_value
    paired = paired_verdict(key, delta, base_quality, new_quality, hints)
    if paired is not None:
        return paired
    errors = [_stderr(base_quality, key), _stderr(new_quality, key)]
    if any(e is None for e in errors):
        return Verdict(key, plain, state="none", reason="no standard error", delta=delta)
    se = math.hypot(*[float(e) for e in errors if e is not None])
    if abs(delta) <= STDERR_MULTIPLE * se:
        return Verdict(key, plain, state="same", delta=delta, stderr=se, paired=False)
    lower = registry.minimise(key, (hints or {}).get(key))
    state: State = "better" if (delta < 0) == lower else "worse"
    return Verdict(key, plain, state=state, delta=delta, stderr=se, paired=False)


def paired_verdict(
    key: str,
    delta: float,
    base_quality: Mapping[str, Any] | None,
    new_quality: Mapping[str, Any] | None,
    hints: Mapping[str, str] | None = None,
) -> Verdict | None:
    """The verdict on paired differences (same text, same examples); None when the runs cannot be paired."""
    name = key.removeprefix("quality.")
    lower = registry.minimise(key, (hints or {}).get(key))
    if name == "perplexity":
        found = perplexity_ratio(base_quality, new_quality)
        if found is None:
            return None
        if found.interval is None:
            return Verdict(key, found.value, state="none", reason="too few blocks", delta=delta, paired=True)
        return Verdict(key, found.value, found.interval, _direction(key, found, hints), delta=delta, paired=True)
    if not name.startswith("task:") or name.count(":") != 1:
        return None
    found_task = task_difference(name, base_quality, new_quality)
    if found_task is None:
        return None
    mean, se = found_task
    plain = None if (base := (base_quality or {}).get(name)) in (None, 0) else (base + mean) / base
    if se is None:
        return Verdict(key, plain, state="none", reason="one example", delta=mean, paired=True)
    state: State = "same" if abs(mean) <= STDERR_MULTIPLE * se else ("better" if (mean < 0) == lower else "worse")
    return Verdict(key, plain, state=state, delta=mean, stderr=se, paired=True)


def verdicts_between(
    base: Any,
    run: Any,
    keys: Sequence[str],
    values: tuple[Mapping[str, float | None], Mapping[str, float | None]],
    samples: tuple[Samples | None, Samples | None] = (None, None),
    hints: Mapping[str, str] | None = None,
) -> dict[str, Verdict]:
    """A verdict per metric key of ``run`` against ``base``; ``values`` = (baseline, run) flat figures."""
    out: dict[str, Verdict] = {}
    b, v = values
    for key in keys:
        if key.startswith("quality."):
            out[key] = accuracy_verdict(key, b.get(key), v.get(key), base.quality, run.quality, hints)
        elif _group_stat(key) is not None or registry.lookup(key).interval is not None:
            out[key] = speed_verdict(key, b.get(key), v.get(key), base.metrics, run.metrics, samples)
    return out
