"""The KV block pool, as vLLM v1's block pool keeps it.

Blocks have reference counts. A full block of a request is registered under its chained hash
(:mod:`engine.whatif.serving.hashes`) when the step that fills it is scheduled; a block whose
last user lets it go returns to the free queue's tail (a request's blocks in reverse, so its last
blocks are evicted first) and stays findable by its hash until it is reused: allocation takes
free blocks from the head, least recently freed first, evicting their hashes (LRU). A lookup
finds the longest run of cached blocks of a request's hashes; a cached block that was free is
taken out of the free queue ("touched"). When two blocks hold the same hash the first
registered one stays the one found (vLLM keeps both findable); the other is reused uncached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class BlockPool:
    """``num_blocks`` KV blocks: reference counts, the free queue, and the hash map of cached blocks."""

    def __init__(self, num_blocks: int, caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.caching = caching
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.used = 0  # blocks some request holds
        self.peak = 0

    @property
    def free(self) -> int:
        """Blocks that can be allocated (free, cached or not)."""
        return len(self._free)

    @property
    def cached(self) -> int:
        """Blocks findable by their hash (held or free)."""
        return len(self._cached)

    def lookup(self, hashes: Sequence[int], max_blocks: int) -> list[int]:
        """The cached blocks of the longest run of ``hashes`` from the first, at most ``max_blocks``."""
        found: list[int] = []
        if not self.caching:
            return found
        cached = self._cached
        for i in range(min(max_blocks, len(hashes))):
            block = cached.get(hashes[i])
            if block is None:
                break
            found.append(block)
        return found

    def can_allocate(self, new: int, hits: Sequence[int] = ()) -> bool:
        """Whether ``new`` blocks can be allocated after touching ``hits`` (free hits count against it)."""
        evictable = sum(1 for b in hits if self._ref[b] == 0) if hits else 0
        return new + evictable <= len(self._free)

    def take(self, hits: list[int], new: int) -> list[int]:
        """Touch ``hits`` and allocate ``new`` blocks after them; the request's blocks."""
        ref, free = self._ref, self._free
        for b in hits:
            if ref[b] == 0:
                del free[b]
                self.used += 1
            ref[b] += 1
        return hits + self.allocate(new)

    def allocate(self, n: int) -> list[int]:
        """``n`` blocks from the free queue's head, their hashes evicted."""
        out = []
        free, ref, hashes, cached = self._free, self._ref, self._hash, self._cached
        for _ in range(n):
            b = free.popitem(last=False)[0]
            h = hashes[b]
            if h is not None:
                hashes[b] = None
                if cached.get(h) == b:
                    del cached[h]
            ref[b] = 1
            out.append(b)
        self.used += n
        if self.used > self.peak:
            self.peak = self.used
        return out

    def register(self, block: int, block_hash: int) -> None:
        """Make a full block findable by its hash (unless another block already is)."""
        if self.caching and block_hash not in self._cached:
            self._cached[block_hash] = block
            self._hash[block] = block_hash

    def release(self, blocks: Sequence[int]) -> None:
        """A request lets its blocks go, last first; those nobody holds join the free queue's tail."""
        ref, free = self._ref, self._free
        for b in reversed(blocks):
            ref[b] -= 1
            if ref[b] == 0:
                free[b] = None
                self.used -= 1
