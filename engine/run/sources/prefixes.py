"""Shared prefixes (``prefix_count`` K, ``prefix_tokens`` N): K system prompts of N tokens, cut from the
default corpus at seeded offsets; each request takes one (seeded), so a prefix cache sees them again."""

from __future__ import annotations

import numpy as np

from engine.backends.base import Tokenizer
from engine.spec import Workload


def shared_prefixes(workload: Workload, pool: list[int] | None, vocab_size: int) -> list[list[int]]:
    """The K prefixes as token ids (random ids from the vocabulary when there is no tokenizer's pool)."""
    k, n = workload.prefix_count or 0, workload.prefix_tokens or 0
    rng = np.random.default_rng(workload.seed + 3)
    if pool is None:
        return [rng.integers(0, vocab_size, size=n).tolist() for _ in range(k)]
    while len(pool) < n + 1:
        pool = pool + pool
    return [pool[s : s + n] for s in rng.integers(0, len(pool) - n, size=k)]


def prefix_choices(workload: Workload, count: int) -> list[int]:
    """Which prefix each of ``count`` requests takes (seeded)."""
    if not workload.prefix_count:
        return []
    return np.random.default_rng(workload.seed + 4).integers(0, workload.prefix_count, size=count).tolist()


def prefix_text(tokenizer: Tokenizer, prefix: list[int]) -> str:
    """A prefix as the text of a system message (datasets send messages)."""
    return tokenizer.decode(prefix, skip_special_tokens=True)
