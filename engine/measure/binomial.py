"""The binomial CDF the percentile intervals need (pure): ``scipy.stats.binom.cdf`` without importing
scipy.stats, and for a small sample without importing scipy at all (a benchmark client's one-request
run starts in about a second: :mod:`engine.measure.stats` imports this, not scipy)."""

from __future__ import annotations

import math

import numpy as np

_EXACT_BINOM_N = 64  # up to this many samples the binomial CDF is summed exactly here (no scipy import)


def binom_cdf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    """``scipy.stats.binom.cdf(k, n, p)`` for whole ``k`` in [0, n], from the ufunc it calls itself: the same
    numbers without importing scipy.stats; a small ``n`` sums the exact terms (equal to ~1e-15, no scipy)."""
    if n <= _EXACT_BINOM_N:
        cdf = np.minimum(np.cumsum([math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(n + 1)]), 1.0)
        whole = np.floor(np.asarray(k, dtype=np.float64)).astype(np.int64)
        return np.where(whole < 0, 0.0, cdf[np.clip(whole, 0, n)])
    try:
        from scipy.special._ufuncs import _binom_cdf as cdf
    except ImportError:  # pragma: no cover - another scipy: the public way
        from scipy.stats import binom

        return np.asarray(binom.cdf(k, n, p))
    return np.asarray(cdf(np.floor(k).astype(np.float64), n, p))
