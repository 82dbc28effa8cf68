"""Prompt ids from a trace's hash ids: equal ids give identical 512-token blocks (so a server's
prefix cache sees the trace's sharing), different ids different blocks, the last block cut."""

from __future__ import annotations

import pytest

from engine.data.hash_blocks import prompt_ids_from_hash_ids
from engine.spec import SpecError


def test_equal_leading_hash_ids_share_their_blocks_exactly():
    a = prompt_ids_from_hash_ids([46, 47, 48], 1500, vocab_size=32000, seed=3)
    b = prompt_ids_from_hash_ids([46, 47, 2353], 1100, vocab_size=32000, seed=3)
    assert len(a) == 1500 and len(b) == 1100
    assert a[:1024] == b[:1024]  # blocks 46 and 47
    assert a[1024:1100] != b[1024:1100]
    assert all(0 <= t < 32000 for t in a)
    assert prompt_ids_from_hash_ids([46, 47, 48], 1500, vocab_size=32000, seed=3) == a  # deterministic
    assert prompt_ids_from_hash_ids([46, 47, 48], 1500, vocab_size=32000, seed=4) != a  # seeded


def test_the_same_id_gives_the_same_block_wherever_it_stands():
    a = prompt_ids_from_hash_ids([7, 9], 8, block_size=4, vocab_size=1000)
    b = prompt_ids_from_hash_ids([9], 4, block_size=4, vocab_size=1000)
    assert a[4:] == b


def test_blocks_from_a_pool_are_windows_of_real_text_ids():
    pool = list(range(1000, 1010))  # shorter than a block: windows wrap around
    ids = prompt_ids_from_hash_ids([1, 2], 30, block_size=16, pool=pool, seed=0)
    assert len(ids) == 30 and set(ids) <= set(pool)
    first = ids[:16]
    assert all(b - a in (1, -9) for a, b in zip(first, first[1:], strict=False))  # consecutive, wrapping
    assert prompt_ids_from_hash_ids([1], 16, block_size=16, pool=pool, seed=0) == first


def test_hash_ids_that_do_not_cover_the_input_are_refused():
    with pytest.raises(SpecError, match=r"2 hash ids of 512 tokens cannot make a prompt of 1100 tokens"):
        prompt_ids_from_hash_ids([1, 2], 1100, vocab_size=100)
    with pytest.raises(ValueError, match=r"pool of token ids or a vocabulary size"):
        prompt_ids_from_hash_ids([1], 10)
    assert prompt_ids_from_hash_ids([], 0, vocab_size=10) == []
