"""Confidence intervals: the order-statistic rule, and simulated comparisons with known effects."""

from __future__ import annotations

import numpy as np
import pytest

from engine.measure.stats import min_samples, percentile_ci, ratio_ci


def test_a_percentile_needs_enough_samples_to_be_bracketed():
    assert [min_samples(q) for q in (50, 90, 95, 99)] == [6, 29, 59, 299]
    x = np.arange(1.0, 300.0)
    assert percentile_ci(x[:5], 50) is None  # "n too small", never a number
    assert percentile_ci(x[:298], 99) is None
    assert percentile_ci(x, 99) is not None
    with pytest.raises(ValueError):
        min_samples(100)


def test_percentile_interval_covers_the_true_value_about_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    true_median = float(np.exp(4.0))  # lognormal(4, s) has median e^4
    covered = sum(percentile_ci(rng.lognormal(4.0, 0.3, 50), 50).contains(true_median) for _ in range(300))
    assert 0.92 <= covered / 300 <= 0.99


def test_a_true_ten_percent_difference_is_detected_and_equal_draws_rarely_are():
    """200 simulated comparisons each at 200 requests per run (TPOT-like lognormal samples)."""
    rng = np.random.default_rng(11)
    detected = sum(
        ratio_ci(rng.lognormal(4, 0.2, 200), 1.1 * rng.lognormal(4, 0.2, 200), seed=i).significant for i in range(200)
    )
    false_alarms = sum(
        ratio_ci(rng.lognormal(4, 0.2, 200), rng.lognormal(4, 0.2, 200), seed=i).significant for i in range(200)
    )
    assert detected / 200 >= 0.9
    assert false_alarms / 200 <= 0.05 + 0.03  # 5 % nominal; 200 trials leave a few points of sampling error


def test_a_ratio_of_samples_too_small_has_no_interval_and_is_not_significant():
    r = ratio_ci([10, 11, 12], [20, 21, 22])
    assert r is not None and r.value == pytest.approx(21 / 11)
    assert r.interval is None and not r.significant
    assert ratio_ci([], [1.0]) is None
