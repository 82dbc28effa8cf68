"""How sure a figure is: confidence intervals of percentiles and of ratios between runs (pure).

Rules (95 % unless asked otherwise):

- **A percentile the sample can support.** A distribution-free interval for the q-th
  percentile exists only when some pair of order statistics brackets it with the chosen
  confidence, i.e. when ``1 - p**n - (1 - p)**n >= confidence`` for ``p = q/100``
  (:func:`min_samples`): p50 needs 6 requests, p90 29, p95 59, p99 299. Below that the
  percentile is "n too small" (:func:`percentile_ci` returns None), never a number.
- **Interval of a percentile**: the exact order-statistic interval (binomial coverage of
  the pair of order statistics closest to ``n * p``); it needs no resampling, so it is
  deterministic and cheap for pooled ITL gaps of any size.
- **Interval of a ratio** (recipe / baseline) of one statistic between two independent
  samples: a seeded percentile bootstrap (``scipy.stats.bootstrap``); the difference is
  significant when the interval excludes 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
N_RESAMPLES = 2000
_MAX_BOOTSTRAP_SAMPLES = 5000  # larger samples are thinned evenly (sorted), keeping their shape


@dataclass(frozen=True)
class Interval:
    """A confidence interval ``[lo, hi]`` at ``confidence``."""

    lo: float
    hi: float
    confidence: float = CONFIDENCE

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi

    def half_width_pct(self, centre: float) -> float | None:
        """Half the interval's width as a percentage of ``centre`` (None when centre is 0)."""
        return None if centre == 0 else 50.0 * (self.hi - self.lo) / abs(centre)


@dataclass(frozen=True)
class Ratio:
    """``new / base`` of one statistic, with its interval (None: a sample too small for it)."""

    value: float
    interval: Interval | None

    @property
    def significant(self) -> bool:
        """The interval excludes 1 (False when there is no interval: too little evidence)."""
        return self.interval is not None and not self.interval.contains(1.0)


def min_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """Fewest samples for which the q-th percentile (0 < q < 100) has a distribution-free interval."""
    p = q / 100.0
    if not 0.0 < p < 1.0:
        raise ValueError(f"percentile {q} must lie strictly between 0 and 100")
    n = 2
    while 1.0 - p**n - (1.0 - p) ** n < confidence:
        n += 1
    return n


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k)."""
    from scipy.stats import binom

    return float(binom.cdf(k, n, p))


def percentile_ci(samples: Sequence[float] | np.ndarray, q: float, confidence: float = CONFIDENCE) -> Interval | None:
    """The order-statistic interval of the q-th percentile; None when the sample cannot support it."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n < min_samples(q, confidence):
        return None
    p = q / 100.0
    centre = p * n
    # widen symmetrically (in ranks) around n*p until the pair covers the percentile with `confidence`
    lo, hi = max(0, math.floor(centre) - 1), min(n - 1, math.ceil(centre))
    while _binom_cdf(hi, n, p) - _binom_cdf(lo, n, p) < confidence:
        if lo > 0:
            lo -= 1
        if hi < n - 1:
            hi += 1
        if lo == 0 and hi == n - 1:
            break
    return Interval(float(x[lo]), float(x[hi]), confidence)


def _thin(x: np.ndarray) -> np.ndarray:
    if x.size <= _MAX_BOOTSTRAP_SAMPLES:
        return x
    idx = np.linspace(0, x.size - 1, _MAX_BOOTSTRAP_SAMPLES).round().astype(int)
    return np.sort(x)[idx]


def ratio_ci(
    base: Sequence[float] | np.ndarray,
    new: Sequence[float] | np.ndarray,
    q: float = 50.0,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Ratio | None:
    """``percentile(new, q) / percentile(base, q)`` with a bootstrap interval; None when a sample is empty.

    The interval is None (and the ratio not significant) when either sample is too small
    for the percentile by :func:`min_samples`.
    """
    from scipy.stats import bootstrap

    b = np.asarray(base, dtype=np.float64)
    a = np.asarray(new, dtype=np.float64)
    b, a = b[np.isfinite(b)], a[np.isfinite(a)]
    if b.size == 0 or a.size == 0:
        return None
    denominator = float(np.percentile(b, q))
    if denominator == 0:
        return None
    value = float(np.percentile(a, q)) / denominator
    need = min_samples(q, confidence)
    if b.size < need or a.size < need:
        return Ratio(value, None)

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.percentile(y, q, axis=axis) / np.percentile(x, q, axis=axis)

    res = bootstrap(
        (_thin(b), _thin(a)),
        statistic,
        n_resamples=N_RESAMPLES,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        paired=False,
        rng=np.random.default_rng(seed),
    )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Ratio(value, Interval(min(lo, value), max(hi, value), confidence))
