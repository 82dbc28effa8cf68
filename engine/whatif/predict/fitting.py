"""Fitting the serving simulator's step costs to measured runs, with leave-one-out error bands.

Each calibration run is simulated on its own request plan (:mod:`engine.whatif.predict.replay`), so the
simulated request ``i`` is the measured request ``i``. The residuals are the log errors
``log(simulated / measured)`` of every request's TTFT, TPOT and E2E latency (each metric's residuals
scaled by ``1 / sqrt(n)``, so every run and metric weighs the same whatever its length), the log error
of the engine's step count where the server counted its steps (vLLM's ``iteration_tokens_total``), and a
pull ``sqrt(REGULARIZATION) x log(cost / prior)`` toward the family's priors, so costs the runs do not
constrain (a CPU's weights-streaming efficiency and its per-step host time add up to one constant)
stay at their documented values. ``scipy.optimize.least_squares`` (trust region, soft-L1 loss: a few
requests far off, a client hiccup, do not drag the fit) over the logs of :data:`FITTED` within their
bounds, from a few starts (the best kept); finite differences over a tenth of each cost, since a
simulation's times move in small jumps as events reorder (a step of 3 % stopped the search short of
half the error on real runs).

The band is the leave-one-out error: each run predicted by costs fitted on the others, its headline
figures (TTFT p50 and p90, TPOT p50, E2E p90, output throughput) against the measured ones; the median
absolute error per figure over the held-out runs (at least two runs are needed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from engine.measure.stamps import e2el_ns, tpot_ns, ttft_ns
from engine.whatif.predict.observed import Observed
from engine.whatif.predict.replay import Case, case_metrics, case_records, simulate_case
from engine.whatif.serving import StepCosts

REGULARIZATION = 3e-3
DIFF_STEP = 0.1  # finite differences over 10 % of a cost: wider than the jumps of reordered events
FITTED = ("step_s", "seq_s", "arrival_s", "eff_bandwidth", "eff_compute", "frontend_s")
_SHARES = ("eff_bandwidth", "eff_compute")
HEADLINE = (  # (key, the metrics' group, statistic); group None: a scalar
    ("ttft_p50", "ttft_ms", "p50"),
    ("ttft_p90", "ttft_ms", "p90"),
    ("tpot_p50", "tpot_ms", "p50"),
    ("e2el_p90", "e2el_ms", "p90"),
    ("throughput", None, "output_tokens_per_s"),
)


def prior_costs(family: str, kind: str) -> StepCosts:
    """The documented step costs of a family on a device kind, as its engine's descriptor declares them
    (``WhatIf.serving.priors``: vLLM's CPU engine runs eager on the same cores as its API server, milliseconds of
    host time per step; transformers' eager generate loop pays Python per token; a GPU's vLLM little); the
    simulator's defaults for anything undeclared."""
    from engine.whatif.predict.deployment import serving_model

    model = serving_model(family)
    return StepCosts(**dict(model.priors.get(kind, {}))) if model is not None else StepCosts()


@dataclass(frozen=True, eq=False)
class Pair:
    """A calibration run and its simulation case (the same requests, on the hardware it ran on)."""

    observed: Observed
    case: Case


def _bounds(prior: StepCosts) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = [], []
    for name in FITTED:
        p = getattr(prior, name)
        if name in _SHARES:
            lo.append(np.log(0.02 / p))
            hi.append(np.log(1.0 / p))
        else:
            lo.append(np.log(1e-3))
            hi.append(np.log(1e3))
    return np.array(lo), np.array(hi)


def costs_at(x: np.ndarray, prior: StepCosts) -> StepCosts:
    """The costs at log-offsets ``x`` from ``prior`` (one per :data:`FITTED` field)."""
    values = {name: getattr(prior, name) * float(np.exp(v)) for name, v in zip(FITTED, x, strict=True)}
    for name in _SHARES:
        values[name] = min(values[name], 1.0)
    return replace(prior, **values)


def _log_ratios(sim: Sequence[float | None], meas: Sequence[float | None]) -> np.ndarray:
    pairs = [(s, m) for s, m in zip(sim, meas, strict=True) if s and m and s > 0 and m > 0]
    if not pairs:
        return np.zeros(0)
    s, m = np.array(pairs, dtype=float).T
    return np.log(s / m) / np.sqrt(len(pairs))


def _usable(records: Sequence) -> list:
    return [None if (r.error or r.cancelled) else r for r in records]


def run_residuals(pair: Pair, costs: StepCosts) -> np.ndarray:
    """Log errors of one run's per-request TTFT, TPOT and E2E (and step count) under ``costs``."""
    result = simulate_case(pair.case, costs)
    sim, _, _ = case_records(pair.case, result)
    meas = _usable(pair.observed.records)
    n = min(len(sim), len(meas))
    parts = []
    for stamp in (ttft_ns, tpot_ns, e2el_ns):
        parts.append(
            _log_ratios(
                [stamp(s) if m is not None else None for s, m in zip(sim[:n], meas[:n], strict=True)],
                [stamp(m) if m is not None else None for m in meas[:n]],
            )
        )
    steps = pair.observed.counters.get("steps")
    if steps and result.stats.steps:
        parts.append(np.array([np.log(result.stats.steps / steps)]))
    return np.concatenate(parts)


def _starts(lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """Where the search starts: the priors, then the shares halfway to each of their bounds (a simulation's
    errors are not convex in the costs: a start on the wrong side of a regime change stops short)."""
    shares = np.array([name in _SHARES for name in FITTED])
    zero = np.zeros(len(FITTED))
    return [zero, np.where(shares, hi / 2, zero), np.where(shares, lo / 4, zero)]


def fit_costs(pairs: Sequence[Pair], prior: StepCosts, max_nfev: int = 30) -> StepCosts:
    """Step costs minimising the runs' log errors with a pull toward ``prior`` (module doc): the best of a
    few starts (:func:`_starts`)."""
    from scipy.optimize import least_squares

    lo, hi = _bounds(prior)

    def residuals(x: np.ndarray) -> np.ndarray:
        costs = costs_at(x, prior)
        parts = [run_residuals(p, costs) for p in pairs]
        return np.concatenate([*parts, np.sqrt(REGULARIZATION) * x])

    best = None
    for x0 in _starts(lo, hi):
        fit = least_squares(
            residuals, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), loss="soft_l1", f_scale=0.3,
            diff_step=DIFF_STEP, max_nfev=max_nfev,
        )  # fmt: skip
        if best is None or fit.cost < best.cost:
            best = fit
    assert best is not None
    return costs_at(best.x, prior)


def headline(metrics: dict) -> dict[str, float | None]:
    """The figures a band is stated for, from a run's metrics (stored or simulated)."""
    out: dict[str, float | None] = {}
    for key, group, stat in HEADLINE:
        value = (metrics.get(group) or {}).get(stat) if group else metrics.get(stat)
        out[key] = float(value) if isinstance(value, (int, float)) and value > 0 else None
    return out


def predicted_headline(case: Case, costs: StepCosts) -> dict[str, float | None]:
    """A case's headline figures simulated under ``costs``."""
    result = simulate_case(case, costs)
    records, start, end = case_records(case, result)
    return headline(case_metrics(case, records, start, end, result.due_times))


@dataclass(frozen=True)
class HeldOut:
    """One run predicted by costs fitted without it: its headline figures, predicted and measured."""

    run_id: int
    predicted: dict[str, float | None]
    measured: dict[str, float | None]

    def errors(self) -> dict[str, float]:
        """Relative error per figure (predicted / measured - 1) where both exist."""
        return {k: p / m - 1 for k, p in self.predicted.items() if p and (m := self.measured.get(k))}


@dataclass(frozen=True)
class ServingBand:
    """The leave-one-out error: median absolute error per headline figure (%), and the runs it is over."""

    pct: dict[str, float]
    n_runs: int
    worst_pct: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"median_abs_error_pct": self.pct, "worst_abs_error_pct": self.worst_pct, "n_runs": self.n_runs}

    @property
    def words(self) -> str:
        """``LOO median error TTFT p50 ±8 %, TPOT p50 ±3 %, E2E p90 ±6 % (3 runs)``."""
        names = {"ttft_p50": "TTFT p50", "tpot_p50": "TPOT p50", "e2el_p90": "E2E p90", "throughput": "throughput"}
        parts = [f"{names[k]} ±{self.pct[k]:.0f} %" for k in names if k in self.pct]
        return f"LOO median error {', '.join(parts)} ({self.n_runs} runs)"


def band_of(held: Sequence[HeldOut]) -> ServingBand | None:
    """The band over held-out predictions (None without any)."""
    if not held:
        return None
    errors: dict[str, list[float]] = {}
    for h in held:
        for k, e in h.errors().items():
            errors.setdefault(k, []).append(abs(e) * 100)
    pct = {k: float(np.median(v)) for k, v in errors.items()}
    worst = {k: float(np.max(v)) for k, v in errors.items()}
    return ServingBand(pct, len(held), worst)


def leave_one_out(
    pairs: Sequence[Pair], prior: StepCosts, progress: Callable[[str], None] | None = None
) -> list[HeldOut]:
    """Each run predicted by costs fitted on the others (none with fewer than two runs)."""
    if len(pairs) < 2:
        return []
    held = []
    for i, pair in enumerate(pairs):
        if progress:
            progress(f"leave-one-out {i + 1}/{len(pairs)}: fitting without run {pair.observed.run_id}")
        costs = fit_costs([p for j, p in enumerate(pairs) if j != i], prior)
        held.append(
            HeldOut(pair.observed.run_id, predicted_headline(pair.case, costs), headline(pair.observed.metrics))
        )
    return held
