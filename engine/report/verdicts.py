"""Is a difference between two runs real? The one verdict, per metric, that every page, the CLI and the report use.

One rule for every figure (95 %, :mod:`engine.measure.stats`): the ratio new / baseline gets an interval,
and the verdict reads that interval (:func:`classify`):

- **better / worse** (significant): the interval excludes 1, on the metric's good or bad side.
- **same** ("no significant difference"): the interval spans 1 *and* lies within the equivalence margin,
  ``[1/(1 + EQUIVALENCE_MARGIN), 1 + EQUIVALENCE_MARGIN]`` (± 5 %): any difference there is too small to
  matter. Explore's "tied" means exactly this.
- **unclear** ("not enough data"): the interval spans 1 but reaches beyond the margin: the runs cannot
  tell a real difference from none. Never said as "tied" or "no change".
- **thin**: too few samples for the figure at all (p50 needs 6 requests, p90 29, p99 299); **none**: no
  interval (a run stored without one).

How each ratio gets its interval:

- **Latency percentiles** (``tpot_ms_p50`` ...): a seeded bootstrap over each run's per-request samples
  (ITL: pooled gaps) by :func:`engine.measure.stats.ratio_ci`. Means: the same with the mean.
- **Throughput**: output tokens/s and requests/s by a bootstrap over requests of (tokens, duration share)
  per run; tokens/s per user from the per-request 1/TPOT. A figure follows its declared interval rule
  (:mod:`engine.measure.declarations`).
- **Without raw samples** (Explore, runs whose requests are not at hand): the two figures' stored
  intervals combined on the log scale (:func:`engine.measure.stats.ratio_from_intervals`).
- **Accuracy, paired** (:mod:`engine.report.paired`): runs that scored the same text (their
  ``perplexity_blocks`` digests agree) get the perplexity ratio with a paired block-bootstrap interval;
  local tasks scored on the same examples get the mean paired difference ± 2 standard errors of it.
- **Accuracy, unpaired** (runs stored before per-block NLL, other corpora, lm-eval tasks): the difference
  ± 2 standard errors, the two runs' errors added in quadrature. Conservative: it ignores what both runs
  share. ``Verdict.paired`` says which one was used. An accuracy difference's interval is read as a ratio
  to the baseline's value, so the one margin applies.

**A predicted run** (the serving simulator's, :func:`engine.report.runlike.is_predicted`) has no sampling noise: a
pair with one gets no test at all, each figure's verdict ``none`` with its plain ratio and :data:`NO_TEST` as the
reason; :mod:`engine.report.predicted` says the prediction's error against the measured run instead.

With one trial per run these are within-run intervals: drift between runs on a noisy machine is not in
them. Runs with several trials are judged on their stored intervals, which include the spread across
trials (engine.run.repeats.widen_with_repeats). Words for all of this: :mod:`engine.report.verdict_words`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from engine.jsonvalue import JSONMapping
from engine.measure import registry, stats
from engine.measure.stamps import Phase
from engine.report.paired import perplexity_ratio, task_difference
from engine.report.runlike import is_predicted
from engine.report.values import interval, sample_count

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord
    from engine.report.runlike import Measured

State = Literal["better", "worse", "same", "unclear", "thin", "none"]
STDERR_MULTIPLE = 2.0  # an accuracy difference's interval: ± this many standard errors of it
EQUIVALENCE_MARGIN = 0.05  # "no significant difference": the ratio's 95 % interval within ± 5 % of 1
DECIDED: tuple[State, ...] = ("better", "worse", "same")  # the states that are an answer
NO_TEST = "a prediction: no significance test"  # the reason of every verdict on a pair with a predicted run


def classify(lo: float, hi: float, minimise: bool) -> State:
    """The verdict of a ratio's interval ``[lo, hi]`` (module doc): better, worse, same or unclear."""
    if lo > 1.0 or hi < 1.0:
        return "better" if (hi < 1.0) == minimise else "worse"
    if lo >= 1.0 / (1.0 + EQUIVALENCE_MARGIN) and hi <= 1.0 + EQUIVALENCE_MARGIN:
        return "same"
    return "unclear"


@dataclass(frozen=True)
class Verdict:
    """One metric of a run against the baseline.

    ``state``: ``better`` / ``worse`` (significant, in the metric's direction), ``same`` (no significant
    difference: the interval spans 1 within the equivalence margin), ``unclear`` (not enough data: it
    spans 1 and reaches beyond the margin), ``thin`` (too few samples; ``reason`` says why) or ``none``
    (nothing to judge by: no interval or no standard error). ``interval`` is always the ratio's
    (new / baseline), accuracy differences included.
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

    @property
    def decided(self) -> bool:
        """An answer: significantly better or worse, or no significant difference within the margin."""
        return self.state in DECIDED

    def span(self) -> str:
        """``1.62–1.88`` (the ratio's interval), or ``""``."""
        return "" if self.interval is None else f"{self.interval.lo:.2f}–{self.interval.hi:.2f}"


def judged(key: str, value: float, iv: stats.Interval | None, hints: Mapping[str, str] | None = None) -> Verdict:
    """The verdict on a ratio ``value`` with its interval (None: ``none``), in the metric's direction."""
    if iv is None:
        return Verdict(key, value, state="none", reason="no interval")
    return Verdict(key, value, iv, classify(iv.lo, iv.hi, registry.minimise(key, (hints or {}).get(key))))


@dataclass(frozen=True)
class Samples:
    """A run's raw samples for verdicts: each latency group's, and each scalar's by its declared
    interval rule (``mean``: one value per request; ``bootstrap``: rows of (amount, duration share))."""

    groups: dict[str, np.ndarray]
    scalars: dict[str, np.ndarray]


def run_samples(requests: Sequence[RequestRecord] | None, duration_s: float | None) -> Samples | None:
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


def _thin_from_counts(key: str, base_metrics: JSONMapping, new_metrics: JSONMapping) -> str | None:
    parsed = _group_stat(key)
    if parsed is None or parsed[1] == "mean":
        return None
    group, stat = parsed
    counts = [sample_count(m, group) for m in (base_metrics, new_metrics)]
    need = stats.min_samples(float(stat.removeprefix("p")))
    known = [c for c in counts if c is not None]
    return f"n={min(known)}; {stat} needs {need}" if known and min(known) < need else None


def _has_trials(metrics: JSONMapping) -> bool:
    """Several trials: the stored intervals include the spread across them (engine.run.repeats)."""
    return len(metrics.get("trials") or []) > 1


def speed_verdict(
    key: str,
    base_value: float | None,
    new_value: float | None,
    base_metrics: JSONMapping | None,
    new_metrics: JSONMapping | None,
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
    return judged(key, found.value, found.interval)


_STDERR_KEYS = {"kl_mean": "kl_stderr"}  # the accuracy figures whose standard error is stored under another name


def stored_stderr(quality: JSONMapping | None, key: str) -> float | None:
    name = key.removeprefix("quality.")
    quality = quality or {}
    stored = quality.get(_STDERR_KEYS.get(name, f"{name}_stderr"), quality.get(f"{name}:stderr"))
    return registry.finite(stored)


def difference_verdict(
    key: str, base: float, delta: float, se: float, paired: bool, hints: Mapping[str, str] | None = None
) -> Verdict:
    """An accuracy difference ``delta`` ± :data:`STDERR_MULTIPLE` ``se``, judged as a ratio to ``base`` (one
    margin for every figure); a zero baseline (KL of the reference itself) has no ratio: significant or unclear."""
    half = STDERR_MULTIPLE * se
    if base > 0:
        iv = stats.Interval((base + delta - half) / base, (base + delta + half) / base)
        found = judged(key, (base + delta) / base, iv, hints)
        return replace(found, delta=delta, stderr=se, paired=paired)
    lower = registry.minimise(key, (hints or {}).get(key))
    state: State = "unclear" if abs(delta) <= half else ("better" if (delta < 0) == lower else "worse")
    return Verdict(key, None, state=state, delta=delta, stderr=se, paired=paired)


def accuracy_verdict(
    key: str,
    base_value: float | None,
    new_value: float | None,
    base_quality: JSONMapping | None,
    new_quality: JSONMapping | None,
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
    errors = [stored_stderr(base_quality, key), stored_stderr(new_quality, key)]
    if any(e is None for e in errors):
        return Verdict(key, plain, state="none", reason="no standard error", delta=delta)
    return difference_verdict(
        key, base_value, delta, math.hypot(*[float(e) for e in errors if e is not None]), False, hints
    )


def paired_verdict(
    key: str,
    delta: float,
    base_quality: JSONMapping | None,
    new_quality: JSONMapping | None,
    hints: Mapping[str, str] | None = None,
) -> Verdict | None:
    """The verdict on paired differences (same text, same examples); None when the runs cannot be paired."""
    name = key.removeprefix("quality.")
    if name == "perplexity":
        found = perplexity_ratio(base_quality, new_quality)
        if found is None:
            return None
        if found.interval is None:
            return Verdict(key, found.value, state="thin", reason="too few blocks", delta=delta, paired=True)
        return replace(judged(key, found.value, found.interval, hints), delta=delta, paired=True)
    if not name.startswith("task:") or name.count(":") != 1:
        return None
    found_task = task_difference(name, base_quality, new_quality)
    if found_task is None:
        return None
    mean, se = found_task
    base = registry.finite((base_quality or {}).get(name))
    if se is None or base is None:
        return Verdict(key, None, state="thin", reason="one example", delta=mean, paired=True)
    return difference_verdict(key, base, mean, se, True, hints)


def verdicts_between(
    base: Measured,
    run: Measured,
    keys: Sequence[str],
    values: tuple[Mapping[str, float | None], Mapping[str, float | None]],
    samples: tuple[Samples | None, Samples | None] = (None, None),
    hints: Mapping[str, str] | None = None,
) -> dict[str, Verdict]:
    """A verdict per metric key of ``run`` against ``base``; ``values`` = (baseline, run) flat figures. A pair with
    a predicted run is not tested (module doc): each figure both have gets its plain ratio, state ``none``, reason
    :data:`NO_TEST`."""
    out: dict[str, Verdict] = {}
    b, v = values
    if is_predicted(base) or is_predicted(run):
        for key in keys:
            new, old = v.get(key), b.get(key)
            if new is not None and old not in (None, 0):  # a figure one of them lacks has nothing to say
                out[key] = Verdict(key, new / old, state="none", reason=NO_TEST)
        return out
    for key in keys:
        if key.startswith("quality."):
            out[key] = accuracy_verdict(key, b.get(key), v.get(key), base.quality, run.quality, hints)
        elif _group_stat(key) is not None or registry.lookup(key).interval is not None:
            out[key] = speed_verdict(key, b.get(key), v.get(key), base.metrics, run.metrics, samples)
    return out
