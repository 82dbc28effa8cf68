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


def test_mean_trials_and_stored_pairs():
    from engine.measure.stats import from_pair, mean_ci, pair, repeats_ci

    iv = mean_ci([10.0, 12.0, 11.0, 13.0])
    assert iv.lo < 11.5 < iv.hi
    assert mean_ci([1.0]) is None and repeats_ci([42.0]) is None  # one trial: no interval
    assert repeats_ci([10.0, 11.0, None, 12.0]).contains(11.0)
    assert pair(iv) == [iv.lo, iv.hi] and from_pair(pair(iv)) == iv
    assert from_pair(None) is None and from_pair([1, "x"]) is None


def test_bootstrap_of_tokens_over_seconds_is_centred_on_the_plain_ratio():
    from engine.measure.stats import bootstrap_ci, statistic_ratio_ci, sum_ratio

    rng = np.random.default_rng(3)
    rows = np.c_[np.full(100, 32.0), rng.lognormal(0, 0.2, 100)]
    iv = bootstrap_ci(rows, sum_ratio)
    assert iv.contains(rows[:, 0].sum() / rows[:, 1].sum()) and iv.hi - iv.lo < 3
    faster = np.c_[rows[:, 0], rows[:, 1] / 2]
    r = statistic_ratio_ci(rows, faster, sum_ratio)
    assert r.value == pytest.approx(2.0) and r.significant
    assert bootstrap_ci(rows[:1], sum_ratio) is None


def test_ratio_from_two_intervals():
    from engine.measure.stats import Interval, ratio_from_intervals

    wide = ratio_from_intervals(10.0, Interval(9, 11), 10.5, Interval(9.5, 11.5))
    assert wide.interval.contains(1.0) and not wide.significant
    tight = ratio_from_intervals(10.0, Interval(9.9, 10.1), 12.0, Interval(11.9, 12.1))
    assert tight.significant and tight.value == pytest.approx(1.2)
    assert ratio_from_intervals(10.0, None, 12.0, Interval(11, 13)).interval is None


def test_paired_block_ratio_of_identical_runs_is_exactly_one_and_misaligned_blocks_are_refused():
    from engine.measure.stats import paired_block_ratio_ci, paired_difference

    nll = np.random.default_rng(0).gamma(2.0, 20.0, size=40)
    same = paired_block_ratio_ci(nll, nll, [64] * 40)
    assert same.value == 1.0 and same.interval.lo == same.interval.hi == 1.0 and not same.significant
    shifted = paired_block_ratio_ci(nll, nll + 0.64, [64] * 40)  # +0.01 nats a token everywhere
    assert shifted.significant and shifted.value == pytest.approx(np.exp(0.01))
    assert paired_block_ratio_ci(nll, nll[:-1], [64] * 40) is None
    assert paired_block_ratio_ci(nll[:1], nll[:1], [64]).interval is None
    assert paired_difference([1, 0, 1], [1, 1, 1]) == pytest.approx((1 / 3, np.std([0, 1, 0], ddof=1) / np.sqrt(3)))
    assert paired_difference([1, 0], [1]) is None
