"""A seeded reservoir sample: k items of a stream in bounded memory, uniform, filtered."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.data.sampling import reservoir_sample


def test_a_sample_is_seeded_and_its_size_bounded():
    a = reservoir_sample(range(10_000), 50, seed=1)
    assert len(a) == 50 and len(set(a)) == 50
    assert reservoir_sample(range(10_000), 50, seed=1) == a
    assert reservoir_sample(range(10_000), 50, seed=2) != a
    assert sorted(reservoir_sample(range(7), 50, seed=1)) == list(range(7))  # fewer than k: all of them
    assert reservoir_sample(range(7), 0, seed=1) == []
    with pytest.raises(ValueError):
        reservoir_sample(range(7), -1, seed=1)


def test_the_predicate_filters_before_sampling():
    chosen = reservoir_sample(range(1000), 20, seed=0, keep=lambda i: i % 10 == 0)
    assert len(chosen) == 20 and all(i % 10 == 0 for i in chosen)


def test_every_item_is_equally_likely():
    counts = Counter()
    for seed in range(2000):
        counts.update(reservoir_sample(range(20), 5, seed=seed))
    expected = 2000 * 5 / 20
    assert all(abs(counts[i] - expected) < 0.2 * expected for i in range(20)), counts


def test_the_order_is_not_the_streams():
    chosen = reservoir_sample(range(100), 100, seed=0)
    assert sorted(chosen) == list(range(100)) and chosen != list(range(100))
