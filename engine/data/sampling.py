"""A seeded sample of k items from a stream of unknown length, in bounded memory."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def reservoir_sample(items: Iterable[T], k: int, seed: int, keep: Callable[[T], bool] | None = None) -> list[T]:
    """``k`` items drawn uniformly, without replacement, from those of ``items`` that ``keep``
    accepts (all, without ``keep``), holding at most ``k`` of them at any time (reservoir
    sampling, algorithm R). Fewer than ``k`` accepted items are all returned. The same items,
    ``k`` and ``seed`` give the same sample, in a seeded random order (not the stream's, so a
    dataset sorted by length does not send its short prompts first)."""
    if k < 0:
        raise ValueError(f"a sample size must be at least 0, not {k}")
    rng = random.Random(seed)
    chosen: list[T] = []
    seen = 0
    for item in items:
        if keep is not None and not keep(item):
            continue
        seen += 1
        if len(chosen) < k:
            chosen.append(item)
            continue
        slot = rng.randrange(seen)
        if slot < k:
            chosen[slot] = item
    rng.shuffle(chosen)
    return chosen
