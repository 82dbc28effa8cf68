"""Chained hashes of full token blocks, the keys of the simulated prefix cache.

vLLM keys a cached block by a hash of its parent block's hash and its own token ids, so a
block is found again only after the same whole prefix. Here a block's key is a polynomial hash
of the whole prefix up to the block's end (``H(n+1) = H(n) * P + id + 1`` modulo 2**64): it
depends on the parent's hash exactly as vLLM's does, and numpy computes every block of a prompt
in a few vectorised operations (a cumulative sum scaled by powers of ``P`` and of its inverse).

Output tokens have no ids in a simulation: each request's outputs get pseudo ids that depend
only on the request's key and the position, so a preempted request finds its own output blocks
again and a session's next turn finds the previous turn's reply, as with vLLM, and no other
request ever does.
"""

from __future__ import annotations

import numpy as np

_BITS = 64
_MOD = 1 << _BITS
_P = 0x100000001B3  # odd, so it has an inverse modulo 2**64
_P_INV = pow(_P, -1, _MOD)
_OUT_MIX = 0x9E3779B97F4A7C15
_KEY_MIX = 0xBF58476D1CE4E5B9
_powers: list[np.ndarray] = [np.ones(1, dtype=np.uint64), np.ones(1, dtype=np.uint64)]


def _power_tables(m: int) -> tuple[np.ndarray, np.ndarray]:
    """(P**j, P**-j) for j = 0..m modulo 2**64, grown by doubling and kept."""
    if len(_powers[0]) <= m:
        size = max(m + 1, 2 * len(_powers[0]), 4096)
        one = np.ones(1, dtype=np.uint64)
        _powers[0] = np.concatenate((one, np.cumprod(np.full(size - 1, _P, dtype=np.uint64))))
        _powers[1] = np.concatenate((one, np.cumprod(np.full(size - 1, _P_INV, dtype=np.uint64))))
    return _powers[0], _powers[1]


def extend(state: int, length: int, ids: np.ndarray, block_size: int) -> tuple[np.ndarray, int]:
    """The hashes of the blocks that ``ids`` complete after ``length`` tokens hashed to ``state``,
    and the hash of the whole sequence after them (the state to extend it again)."""
    m = len(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"token ids must be integers, not {ids.dtype}")
    if m == 0:
        return np.zeros(0, dtype=np.uint64), state
    power, inverse = _power_tables(m)
    weighted = (ids.astype(np.uint64) + np.uint64(1)) * inverse[1 : m + 1]
    prefix = power[1 : m + 1] * (np.uint64(state) + np.cumsum(weighted, dtype=np.uint64))
    first = block_size - length % block_size  # ids completing the current block (1..block_size)
    return prefix[first - 1 :: block_size].copy(), int(prefix[-1])  # a copy: a view would keep every prefix


def prompt_hashes(ids: np.ndarray, block_size: int) -> tuple[np.ndarray, int]:
    """(hashes of the prompt's full blocks, the prompt's own hash) of token ids ``ids``."""
    return extend(0, 0, ids, block_size)


def output_ids(key: int, count: int) -> np.ndarray:
    """Pseudo token ids of a request's first ``count`` output tokens (the same for the same key)."""
    mixed = np.uint64(((key + 1) * _KEY_MIX) % _MOD)
    return (np.arange(1, count + 1, dtype=np.uint64) * np.uint64(_OUT_MIX)) ^ mixed
