"""Repeats and adaptive stopping: the measured phase repeated, each repetition stored apart.

A *repeat* is one measured phase of the workload's ``requests`` requests (the same prompts
every time; warm-up happens once, before the first). Its stored names stay those of the runs
that exist: ``workload.trials`` says how many, each request records its repeat as ``trial``, and
``metrics["trials"]`` holds every repeat's headline figures; the run's headline figures pool the
repeats' requests (throughput over the sum of their measured durations, so the pauses between
repeats do not count).

**Adaptive stopping** (``until_ci_pct``): after the first ``trials`` trials, more rounds
(trials) of ``requests`` requests are measured until the 95 % interval of the watched
figure (``until_metric``, TPOT p50 by default), computed over the pooled requests with
:func:`engine.measure.stats.percentile_ci`, has a half-width of at most ``until_ci_pct``
% of the figure, or a limit is reached: ``max_requests`` (the last round is cut to fit;
1000 when no limit is given) or ``max_seconds`` of measuring. ``metrics["stopped_because"]``
says which, e.g. ``"ci 1.8 % <= 2 %"``. The interval treats the pooled requests as one
sample (it does not widen for trial-to-trial drift; ``metrics["trial_drift"]`` reports that).

The figures kept per trial, and the intervals widened across trials, are the registry's
``trials`` figures (:mod:`engine.measure.declarations`).

**Drift**: with two or more trials, ``metrics["trial_drift"]`` gives the spread of the
trials' TPOT p50 ((max - min) / median, %) and how much slower the first trial was than
the median of the others (a first trial slower than the rest: the warm-up was too short).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure import registry
from engine.measure.metrics import SLO, compute_metrics
from engine.measure.records import RequestRecord, RunRecord
from engine.measure.stamps import Phase
from engine.measure.stats import pair, percentile_ci, repeats_ci
from engine.spec import Workload

# (trial index, first request index, how many requests) -> (records, phase start ns, phase end ns)
PhaseFn = Callable[[int, int, int], tuple[list[RequestRecord], int, int]]


@dataclass
class Repeat:
    """One measured phase: its requests and bounds."""

    index: int
    records: list[RequestRecord]
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 1)


@dataclass
class Measured:
    """Every repeat of a run, and why measuring stopped (None: the fixed number of repeats ran)."""

    repeats: list[Repeat] = field(default_factory=list)
    stopped_because: str | None = None
    ci_half_width_pct: float | None = None

    @property
    def records(self) -> list[RequestRecord]:
        return [r for t in self.repeats for r in t.records]

    @property
    def duration_ns(self) -> int:
        return sum(t.duration_ns for t in self.repeats)


def metric_samples(records: Sequence[RequestRecord], group: str) -> list[float]:
    """A latency group's samples in ms (``ttft_ms``, ``tpot_ms``, ``e2el_ms``; ``itl_ms``: every gap) of the ok requests."""
    return Phase(records, 0.0).samples[group]


def ci_half_width_pct(records: Sequence[RequestRecord], until_metric: str) -> float | None:
    """Half-width (% of the figure) of the 95 % interval of ``until_metric`` (``tpot_ms_p50``, any spelling
    :func:`engine.measure.registry.canonical` reads); None: n too small."""
    metric = registry.lookup(registry.canonical(until_metric))
    if metric.group is None or metric.interval != "percentile" or metric.stat is None:
        raise ValueError(f"until_metric {until_metric!r} is not a latency percentile such as tpot_ms_p50")
    pct = float(metric.stat.removeprefix("p"))
    samples = metric_samples(records, metric.group)
    interval = percentile_ci(samples, pct)
    if interval is None:
        return None
    return interval.half_width_pct(float(np.percentile(samples, pct)))


def stop_reason(wl: Workload, measured: Measured, elapsed_s: float) -> str | None:
    """Why adaptive stopping ends here, or None to measure another round."""
    half = ci_half_width_pct(measured.records, wl.until_metric)
    measured.ci_half_width_pct = half
    target = wl.until_ci_pct
    if target is not None and half is not None and half <= target:
        return f"ci {half:.1f} % <= {target:g} %"
    ci_words = "n too small for an interval" if half is None else f"ci {half:.1f} %"
    sent = len(measured.records)
    cap = wl.request_cap
    if cap is not None and sent >= cap:
        return f"max_requests {cap} reached ({ci_words})"
    if wl.max_seconds is not None and elapsed_s >= wl.max_seconds:
        return f"max_seconds {wl.max_seconds:g} reached ({ci_words})"
    return None


def measure(wl: Workload, run_phase: PhaseFn, first_index: int, per_round: int | None = None) -> Measured:
    """Run ``wl.trials`` trials, then (with ``until_ci_pct``) rounds until the interval is narrow enough.

    A round is ``per_round`` requests (the plan's measured requests; default ``wl.requests``)."""
    out = Measured()
    started = time.monotonic()
    while True:
        count = wl.requests if per_round is None else per_round
        cap = wl.request_cap
        if cap is not None:
            count = min(count, cap - len(out.records))
        t = len(out.repeats)
        records, start_ns, end_ns = run_phase(t, first_index + len(out.records), count)
        for r in records:
            r.trial = t
        out.repeats.append(Repeat(t, records, start_ns, end_ns))
        if len(out.repeats) < wl.trials and (cap is None or len(out.records) < cap):
            continue
        if wl.soak_minutes is not None:  # a soak: rounds until the time is up
            if time.monotonic() - started < wl.soak_minutes * 60:
                continue
            out.ci_half_width_pct = ci_half_width_pct(out.records, wl.until_metric)
            out.stopped_because = f"soak of {wl.soak_minutes:g} min done ({len(out.repeats)} rounds)"
            return out
        if wl.until_ci_pct is None:
            return out
        out.stopped_because = stop_reason(wl, out, time.monotonic() - started)
        if out.stopped_because is not None:
            return out


def measuring_note(wl: Workload) -> str:
    """What the measuring phase will do, in words, for the progress note."""
    note = f"{wl.requests} request(s) in batches of {wl.batch_size}"
    if wl.trials > 1:
        note = f"{wl.trials} trials of {note}"
    if wl.soak_minutes is not None:
        note += f", repeated for {wl.soak_minutes:g} min (soak)"
    if wl.until_ci_pct is not None:
        note += f", then rounds until {registry.canonical(wl.until_metric)} is within +-{wl.until_ci_pct:g} %"
    return note


def repeat_headline(metrics: JSONMapping) -> JSONObject:
    """The figures of one trial kept in ``metrics["trials"]`` (the registry's ``trials`` figures, as stored):
    p50s of the latency groups, throughput, counts."""
    return {
        m.key: (metrics.get(m.group) or {}).get(m.stat) if m.group else metrics.get(m.key)
        for m in registry.shown_in("trials")
    }


def drift(rows: Sequence[JSONMapping], key: str = "tpot_ms_p50") -> JSONObject | None:
    """Trial-to-trial drift of ``key``: spread (max - min) / median and the first trial against the rest, in %."""
    values = [r.get(key) for r in rows]
    if len(values) < 2 or any(v is None for v in values):
        return None
    median = statistics.median(values)
    rest = statistics.median(values[1:])
    rest_spread = (max(values[1:]) - min(values[1:])) / rest * 100 if rest else None
    return {
        "metric": key,
        "spread_pct": (max(values) - min(values)) / median * 100 if median else None,
        "first_vs_rest_pct": (values[0] - rest) / rest * 100 if rest else None,
        "rest_spread_pct": rest_spread,
    }


def widen_with_repeats(pooled: JSONObject, rows: Sequence[JSONMapping]) -> None:
    """With several trials, each headline interval becomes the wider of the pooled requests' one and
    the t-interval across the trials' values, so drift between trials widens it (pooled requests alone
    would treat the trials as one sample)."""
    if len(rows) < 2:
        return
    targets: list[tuple[JSONObject, str, str]] = []
    for m in registry.shown_in("trials"):
        if m.interval is None:
            continue
        if m.group is None:
            targets.append((pooled.setdefault("ci", {}), m.key, m.key))
        elif pooled.get(m.group):
            targets.append((pooled[m.group].setdefault("ci", {}), str(m.stat), m.key))
    for cis, stat, key in targets:
        across = repeats_ci([r.get(key) for r in rows])
        if across is None:
            continue
        own = cis.get(stat)
        cis[stat] = pair(across) if not own else [min(own[0], across.lo), max(own[1], across.hi)]
    pooled["ci_basis"] = f"the wider of the pooled requests' interval and the one across {len(rows)} trials"


def repeat_metrics(
    measured: Measured,
    warm: list[RequestRecord],
    slo: SLO | None,
    until_metric: str | None = None,
    due_times: bool = False,
) -> JSONObject:
    """The run's metrics: headline figures over every trial's requests, plus per-trial figures and drift.

    ``due_times``: the requests had due times of their own (latency from the due time is kept too)."""
    for r in measured.records:
        if r.output_tokens == 0:
            r.error = r.error or "no tokens returned"
    everything = RunRecord(0, measured.duration_ns, warm + measured.records, due_times=due_times)
    pooled = compute_metrics(everything, slo)
    if len(measured.repeats) > 1 or measured.stopped_because is not None:
        rows = [
            {"trial": t.index, **repeat_headline(compute_metrics(RunRecord(t.start_ns, t.end_ns, t.records), slo))}
            for t in measured.repeats
        ]
        pooled["trials"] = rows
        pooled["trial_drift"] = drift(rows)
        if measured.stopped_because is None:  # fixed trials; adaptive rounds stop on the pooled interval
            widen_with_repeats(pooled, rows)
    if measured.stopped_because is not None:
        pooled["stopped_because"] = measured.stopped_because
        metric = None if until_metric is None else registry.canonical(until_metric)
        pooled["until_ci"] = {"metric": metric, "half_width_pct": measured.ci_half_width_pct}
    return pooled
