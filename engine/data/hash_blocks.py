"""Prompt token ids for a trace's ``hash_ids``: equal ids give identical blocks of tokens, so a
replayed trace shares prefixes (and hits a server's prefix cache) as it did in production."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.spec import SpecError


def prompt_ids_from_hash_ids(
    hash_ids: Sequence[int],
    input_tokens: int,
    block_size: int = 512,
    pool: Sequence[int] | None = None,
    seed: int = 0,
    vocab_size: int | None = None,
) -> list[int]:
    """``input_tokens`` token ids made of one block of ``block_size`` ids per hash id, the last
    block cut to fit.

    A block depends only on ``seed`` and its hash id: ``block_size`` consecutive ids of
    ``pool`` (the token ids of a real text, read from a seeded offset, wrapping around) or,
    when ``pool`` is None, ids drawn uniformly from [0, vocab_size). The hash ids must cover
    the input (``len(hash_ids) * block_size >= input_tokens``)."""
    if block_size < 1:
        raise ValueError(f"a block holds at least 1 token, not {block_size}")
    if seed < 0 or any(i < 0 for i in hash_ids):
        raise ValueError("the seed and the hash ids must be non-negative integers")
    if pool is None and not vocab_size:
        raise ValueError("prompt ids need a pool of token ids or a vocabulary size")
    if pool is not None and not len(pool):
        raise ValueError("the pool of token ids is empty")
    if input_tokens < 0 or len(hash_ids) * block_size < input_tokens:
        raise SpecError(
            f"{len(hash_ids)} hash ids of {block_size} tokens cannot make a prompt of {input_tokens} tokens"
        )
    ids: list[int] = []
    for hash_id in hash_ids:
        if len(ids) >= input_tokens:
            break
        ids.extend(_block(int(hash_id), block_size, pool, seed, vocab_size))
    return ids[:input_tokens]


def _block(hash_id: int, size: int, pool: Sequence[int] | None, seed: int, vocab_size: int | None) -> list[int]:
    rng = np.random.default_rng([seed, hash_id])
    if pool is None:
        return rng.integers(0, vocab_size, size=size).tolist()
    start = int(rng.integers(0, len(pool)))
    block: list[int] = []
    while len(block) < size:
        block.extend(int(t) for t in pool[start : start + size - len(block)])
        start = 0
    return block
