"""How sure a figure is: confidence intervals of percentiles and of ratios between runs (pure).

Rules (95 % unless asked otherwise):

- **A percentile the sample can support.** A distribution-free interval for the q-th
  percentile exists only when some pair of order statistics brackets it with the chosen
  confidence, i.e. when ``1 - p**n - (1 - p)**n >= confidence`` for ``p = q/100``
  (:func:`min_samples`): p50 needs 6 requests, p90 29, p95 59, p99 299. Below that the
  percentile is "n too small" (:func:`percentile_ci` returns None), never a number.
- **Interval of a percentile**: the exact order-statistic interval (binomial coverage of the pair of
  order statistics closest to ``n * p``): deterministic and cheap for pooled ITL gaps of any size.
- **Interval of a ratio** (recipe / baseline) of one statistic between two independent samples: a
  seeded percentile bootstrap (``scipy.stats.bootstrap``), read by :mod:`engine.report.verdicts`.
- **Means and other statistics**: Student's t interval of a mean (:func:`mean_ci`); a seeded
  row bootstrap (:func:`bootstrap_ci`, rows resampled whole, e.g. tokens with their duration
  share for tokens/s) and its two-sample ratio (:func:`statistic_ratio_ci`).
- **Across trials**: a t interval over the per-trial values (:func:`repeats_ci`; one trial: none).
- **Without raw samples**: :func:`ratio_from_intervals` combines two stored intervals on the
  log scale (cruder; for runs whose requests are not at hand).
- **Paired accuracy**: runs that scored the same text get a paired perplexity ratio, a circular block
  bootstrap over blocks of consecutive tokens (:func:`paired_block_ratio_ci`), many times narrower than
  two runs' errors added; tasks on the same examples the mean paired difference (:func:`paired_difference`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.measure.binomial import binom_cdf
from engine.measure.student_t import t_quantile

CONFIDENCE = 0.95
N_RESAMPLES = 2000
_MAX_BOOTSTRAP_SAMPLES = 5000  # larger samples are thinned evenly (sorted), keeping their shape
MAX_BOOTSTRAP_ROWS = 10_000  # a ratio of sums over more rows resamples this many groups of them (bootstrap_ci)


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


def percentile_ci(
    samples: Sequence[float] | np.ndarray, q: float, confidence: float = CONFIDENCE, presorted: bool = False
) -> Interval | None:
    """The order-statistic interval of the q-th percentile; None when the sample cannot support it.

    ``presorted``: ``samples`` is already a sorted float array of finite values (one sort for every
    percentile of a group: a large run's pooled ITL gaps are millions of values)."""
    if presorted:
        x = np.asarray(samples, dtype=np.float64)
    else:
        x = np.sort(np.asarray(samples, dtype=np.float64))
        x = x[np.isfinite(x)]
    n = int(x.size)
    if n < min_samples(q, confidence):
        return None
    p = q / 100.0
    centre = p * n
    # widen symmetrically (in ranks) around n*p until the pair covers the percentile with `confidence`;
    # every width is tried at once (vectorised), first up to a few binomial standard deviations
    guess = int(6 * math.sqrt(n * p * (1 - p))) + 8
    for limit in (guess, n):
        w = np.arange(min(limit, n) + 1)
        lo = np.maximum(0, math.floor(centre) - 1 - w)
        hi = np.minimum(n - 1, math.ceil(centre) + w)
        enough = (binom_cdf(hi, n, p) - binom_cdf(lo, n, p) >= confidence) | ((lo == 0) & (hi == n - 1))
        if enough.any():
            k = int(np.argmax(enough))
            return Interval(float(x[lo[k]]), float(x[hi[k]]), confidence)
    return Interval(float(x[0]), float(x[-1]), confidence)


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


# -- means, ratios of sums and other statistics: t-intervals and a row bootstrap ----------------
def mean_ci(samples: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> Interval | None:
    """Student's t interval of the mean; None for fewer than 2 finite samples."""
    x = np.asarray(samples, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return None
    centre, sem = float(x.mean()), float(x.std(ddof=1)) / math.sqrt(x.size)
    half = t_quantile(x.size - 1, 0.5 + confidence / 2) * sem  # scipy.stats.t.ppf, without scipy at 95 %
    return Interval(centre - half, centre + half, confidence)


def repeats_ci(values: Sequence[float | None], confidence: float = CONFIDENCE) -> Interval | None:
    """The interval of a figure across trials (one value per trial): a t-interval; None for one trial."""
    return mean_ci([v for v in values if v is not None], confidence)


def pair(interval: Interval | None) -> list[float] | None:
    """``[lo, hi]`` as stored in a run's metrics JSON, or None."""
    return None if interval is None else [interval.lo, interval.hi]


def from_pair(value: Sequence[float] | None, confidence: float = CONFIDENCE) -> Interval | None:
    """The inverse of :func:`pair` (None for anything that is not two finite numbers)."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    try:
        lo, hi = float(value[0]), float(value[1])
    except (TypeError, ValueError):
        return None
    return Interval(lo, hi, confidence) if math.isfinite(lo) and math.isfinite(hi) else None


Statistic = Callable[[np.ndarray], np.ndarray]  # (resamples, n, columns) -> (resamples,)


def _resampled(rows: np.ndarray, statistic: Statistic, rng: np.random.Generator, batch: int = 200) -> np.ndarray:
    """``statistic`` over N_RESAMPLES resamples of whole rows (rows stay paired), in batches.

    The statistics of this module are computed column by column from the resampled row indices
    (:data:`_BY_COLUMN`): the same draws and the same sums as over the gathered rows, at a third of
    the time on large runs."""
    out = np.empty(N_RESAMPLES)
    by_column = _BY_COLUMN.get(statistic)
    columns = [np.ascontiguousarray(rows[:, j]) for j in range(rows.shape[1])] if by_column else []
    for start in range(0, N_RESAMPLES, batch):
        m = min(batch, N_RESAMPLES - start)
        idx = rng.integers(0, rows.shape[0], size=(m, rows.shape[0]))
        out[start : start + m] = by_column(columns, idx) if by_column else statistic(rows[idx])
    return out


def _rows(data: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    rows = np.asarray(data, dtype=np.float64)
    rows = rows.reshape(len(rows), -1) if rows.size else rows.reshape(0, 1)
    return rows[np.isfinite(rows).all(axis=1)]


def bootstrap_ci(
    data: Sequence[Sequence[float]] | np.ndarray,
    statistic: Statistic,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    min_rows: int = 2,
) -> Interval | None:
    """A seeded percentile bootstrap of ``statistic`` over rows of ``data`` (columns resampled together).

    A ratio of sums (:func:`sum_ratio`) over more than :data:`MAX_BOOTSTRAP_ROWS` rows resamples
    groups instead: row i is summed into group ``i mod MAX_BOOTSTRAP_ROWS`` and the groups are the
    rows resampled. The figure is the same ratio, and a resampled sum of groups has the variance of a
    resampled sum of rows (n times a row's), so the interval is the rows' one to within the bootstrap's
    own noise, at a fixed cost (100,000 requests: seconds less). Up to that many rows nothing changes."""
    rows = _rows(data)
    if rows.shape[0] < min_rows:
        return None
    centre = float(statistic(rows[np.newaxis])[0])
    if statistic is sum_ratio and rows.shape[0] > MAX_BOOTSTRAP_ROWS:
        groups = np.zeros((MAX_BOOTSTRAP_ROWS, rows.shape[1]))
        np.add.at(groups, np.arange(rows.shape[0]) % MAX_BOOTSTRAP_ROWS, rows)
        rows = groups
    stats = _resampled(rows, statistic, np.random.default_rng(seed))
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return None
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return Interval(min(float(lo), centre), max(float(hi), centre), confidence)


def sum_ratio(resamples: np.ndarray) -> np.ndarray:
    """Column 0 summed over column 1 summed (e.g. tokens / seconds), per resample."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return resamples[..., 0].sum(axis=-1) / resamples[..., 1].sum(axis=-1)


def column_mean(resamples: np.ndarray) -> np.ndarray:
    """The mean of column 0, per resample."""
    return resamples[..., 0].mean(axis=-1)


def _sum_ratio_by_column(columns: list[np.ndarray], idx: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return columns[0][idx].sum(axis=-1) / columns[1][idx].sum(axis=-1)


def _column_mean_by_column(columns: list[np.ndarray], idx: np.ndarray) -> np.ndarray:
    return columns[0][idx].mean(axis=-1)


# the module's statistics, from the resampled row indices and the data's columns (see _resampled)
_BY_COLUMN: dict[Statistic, Callable[[list[np.ndarray], np.ndarray], np.ndarray]] = {
    sum_ratio: _sum_ratio_by_column,
    column_mean: _column_mean_by_column,
}


def statistic_ratio_ci(
    base: Sequence[Sequence[float]] | np.ndarray,
    new: Sequence[float] | np.ndarray,
    statistic: Statistic,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    min_rows: int = 2,
) -> Ratio | None:
    """``statistic(new) / statistic(base)`` with a bootstrap interval (each sample resampled by rows).

    None when a sample is empty or the base statistic is 0; no interval below ``min_rows`` rows.
    """
    b, a = _rows(base), _rows(new)
    if b.shape[0] == 0 or a.shape[0] == 0:
        return None
    denominator = float(statistic(b[np.newaxis])[0])
    if denominator == 0 or not math.isfinite(denominator):
        return None
    value = float(statistic(a[np.newaxis])[0]) / denominator
    if b.shape[0] < min_rows or a.shape[0] < min_rows:
        return Ratio(value, None)
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = _resampled(a, statistic, rng) / _resampled(b, statistic, rng)
    ratios = ratios[np.isfinite(ratios)]
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return Ratio(value, Interval(min(float(lo), value), max(float(hi), value), confidence))


def ratio_from_intervals(
    base: float | None,
    base_ci: Interval | None,
    new: float | None,
    new_ci: Interval | None,
    confidence: float = CONFIDENCE,
) -> Ratio | None:
    """``new / base`` with an approximate interval from the two figures' own intervals.

    For runs whose raw samples are not at hand: each interval is read as a normal one on the
    log scale (standard error = log(hi/lo) / (2 z)) and the two errors add in quadrature.
    Cruder than :func:`ratio_ci`; no interval when either figure has none or is not positive.
    """
    from scipy.stats import norm

    if base is None or new is None or base == 0:
        return None
    value = new / base
    if base_ci is None or new_ci is None or min(base, new, base_ci.lo, new_ci.lo) <= 0:
        return Ratio(value, None)
    z = float(norm.ppf(0.5 + confidence / 2))
    se = math.hypot(math.log(base_ci.hi / base_ci.lo), math.log(new_ci.hi / new_ci.lo)) / (2 * z)
    return Ratio(value, Interval(value * math.exp(-z * se), value * math.exp(z * se), confidence))


# -- paired accuracy: two runs scored on the same text (or the same examples) ------------------------
def _block_runs(n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``N_RESAMPLES`` circular block-bootstrap index sets of ``n`` blocks, in runs of ``length`` neighbours."""
    runs = math.ceil(n / length)
    starts = rng.integers(0, n, size=(N_RESAMPLES, runs))
    return ((starts[..., None] + np.arange(length)) % n).reshape(N_RESAMPLES, -1)[:, :n]


def paired_block_ratio_ci(
    base_nll: Sequence[float] | np.ndarray,
    new_nll: Sequence[float] | np.ndarray,
    tokens: Sequence[float] | np.ndarray,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Ratio | None:
    """Perplexity of ``new`` over ``base`` when both scored the same tokens, with a paired interval.

    Each entry is one block of consecutive scored tokens: its NLL sum in either run and its token
    count. The ratio is ``exp((sum new - sum base) / tokens)``; its interval a circular block
    bootstrap of the blocks (the same blocks drawn for both runs, so what they share cancels), drawn
    in runs of about ``n ** (1/3)`` neighbouring blocks so that dependence between nearby tokens is
    kept. None when the blocks do not line up; no interval under 2 blocks.
    """
    b, a, t = (np.asarray(x, dtype=np.float64) for x in (base_nll, new_nll, tokens))
    if not (b.shape == a.shape == t.shape) or b.size == 0 or not np.isfinite(np.concatenate([a, b, t])).all():
        return None
    total = float(t.sum())
    if total <= 0:
        return None
    value = math.exp((float(a.sum()) - float(b.sum())) / total)
    if b.size < 2:
        return Ratio(value, None)
    sums, token_sums = block_resample_sums(np.stack([b, a]), t, seed)
    return block_ratio(value, sums[0], sums[1], token_sums, confidence)


def block_resample_sums(nll: np.ndarray, tokens: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Each row's NLL summed over :func:`paired_block_ratio_ci`'s draws (the same for every row, from ``seed``),
    and each draw's tokens: runs scored on one text share them, so any two pair without drawing again."""
    n = tokens.size
    idx = _block_runs(n, max(1, round(n ** (1 / 3))), np.random.default_rng(seed))
    return np.stack([row[idx].sum(axis=1) for row in nll]), tokens[idx].sum(axis=1)


def block_ratio(
    value: float, base_sums: np.ndarray, new_sums: np.ndarray, token_sums: np.ndarray, confidence: float = CONFIDENCE
) -> Ratio:
    """The perplexity ratio ``value`` with the interval of its resampled sums (:func:`block_resample_sums`)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratios = np.exp((new_sums - base_sums) / token_sums)
    ratios = ratios[np.isfinite(ratios)]
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return Ratio(value, Interval(min(float(lo), value), max(float(hi), value), confidence))


def paired_difference(
    base: Sequence[float] | np.ndarray, new: Sequence[float] | np.ndarray
) -> tuple[float, float | None] | None:
    """``mean(new - base)`` over paired items (a task's examples) and its standard error; None when unpaired."""
    b, a = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    if b.shape != a.shape or b.size == 0:
        return None
    d = a - b
    return float(d.mean()), (float(d.std(ddof=1)) / math.sqrt(d.size) if d.size > 1 else None)
