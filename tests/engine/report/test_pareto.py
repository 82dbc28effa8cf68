"""Pareto front: dominance, ties, minimise/maximise per axis, missing values."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from engine.report.pareto import pareto_front, pareto_mask


def brute_force(xs, ys, min_x=True, min_y=True):
    pts = [(x if min_x else -x, y if min_y else -y) for x, y in zip(xs, ys, strict=True)]
    front = []
    for i, (x, y) in enumerate(pts):
        dominated = any((ox <= x and oy <= y and (ox < x or oy < y)) for j, (ox, oy) in enumerate(pts) if j != i)
        if not dominated:
            front.append(i)
    return front


def test_minimise_both_simple():
    xs = [1, 2, 3, 2]
    ys = [3, 2, 1, 3]
    assert pareto_front(xs, ys) == [0, 1, 2]


def test_identical_points_are_all_on_front():
    assert pareto_front([1, 1, 2], [1, 1, 0]) == [0, 1, 2]


def test_tie_on_one_axis_keeps_only_best_on_other():
    # same x: the smaller y dominates; same y: the smaller x dominates
    assert pareto_front([1, 1, 2], [5, 4, 4]) == [1]


@pytest.mark.parametrize(
    ("min_x", "min_y", "expected"),
    [
        (True, True, [0]),
        (False, False, [3]),
        (True, False, [1]),
        (False, True, [2]),
    ],
)
def test_direction_per_axis(min_x, min_y, expected):
    xs = [0, 0, 10, 10]
    ys = [0, 10, 0, 10]
    assert pareto_front(xs, ys, min_x, min_y) == expected


def test_latency_vs_throughput_front():
    # x = TPOT (minimise), y = tokens/s (maximise)
    xs = [10, 20, 30, 15, 25]
    ys = [50, 90, 95, 40, 80]
    assert pareto_front(xs, ys, True, False) == [0, 1, 2]


def test_missing_values_never_on_front():
    xs = [None, 1.0, math.nan, 2.0, "x", math.inf]
    ys = [0.0, 2.0, 0.0, 1.0, 0.0, 0.0]
    assert pareto_front(xs, ys) == [1, 3]
    assert pareto_mask(xs, ys) == [False, True, False, True, False, False]


def test_empty_and_length_mismatch():
    assert pareto_front([], []) == []
    with pytest.raises(ValueError):
        pareto_front([1], [1, 2])


def test_matches_brute_force_with_many_ties():
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(1, 12)
        xs = [rng.randint(0, 4) for _ in range(n)]
        ys = [rng.randint(0, 4) for _ in range(n)]
        for min_x, min_y in itertools.product((True, False), repeat=2):
            assert pareto_front(xs, ys, min_x, min_y) == brute_force(xs, ys, min_x, min_y)
