"""Pareto fronts over two axes, each minimised or maximised (pure, no pandas needed).

A point is on the front when no other point is at least as good on both axes and
strictly better on one. Ties are kept: identical points are all on the front (none
dominates another), and of several points with the same value on one axis only the
best on the other axis survive. Missing values (None, NaN, inf) are never on the front.
Which way each axis is better is the caller's to say: :func:`engine.report.figures.front_run_ids`
asks the metric registry (``registry.minimise``), never the column's name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.measure.registry import finite


def pareto_front(
    xs: Sequence[object],
    ys: Sequence[object],
    minimise_x: bool = True,
    minimise_y: bool = True,
) -> list[int]:
    """Indices (ascending) of the non-dominated points of ``zip(xs, ys)``.

    O(n log n): sort by x (best first), then sweep keeping the best y seen at a
    strictly better x.
    """
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys differ in length ({len(xs)} != {len(ys)})")
    points: list[tuple[float, float, int]] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        fx, fy = finite(x), finite(y)
        if fx is None or fy is None:
            continue
        points.append((fx if minimise_x else -fx, fy if minimise_y else -fy, i))
    points.sort()
    front: list[int] = []
    best_y = math.inf
    k = 0
    while k < len(points):
        x = points[k][0]
        group_min = points[k][1]  # sorted by (x, y): the group's first has its smallest y
        j = k
        while j < len(points) and points[j][0] == x:
            if points[j][1] == group_min and group_min < best_y:
                front.append(points[j][2])
            j += 1
        best_y = min(best_y, group_min)
        k = j
    return sorted(front)


def pareto_mask(
    xs: Sequence[object], ys: Sequence[object], minimise_x: bool = True, minimise_y: bool = True
) -> list[bool]:
    """``True`` for each point on the front (same order as the input)."""
    on_front = set(pareto_front(xs, ys, minimise_x, minimise_y))
    return [i in on_front for i in range(len(xs))]
