"""Tokens each decode step yields to each decoding request, and their running sum over steps.

Without speculative decoding a decode step yields one token. With it, each step proposes ``k``
tokens per request and yields ``1 + accepted``: the accepted count is drawn once per step
(seeded, binomial with the acceptance rate, so its mean is ``k x rate``, vLLM's acceptance rate
being accepted over proposed) and shared by the step's requests. A request's tokens over any
run of steps are then a difference of the running sum ``C`` (``C[s]``: tokens one request
decoding since step 0 would have before step ``s``), which lets the simulator keep decoding
requests in aggregate and find the step of each one's next event by a search in ``C``.
"""

from __future__ import annotations

import numpy as np

_CHUNK = 4096  # steps drawn at a time (a fixed size: the same draws whatever asks for them)


class TokenClock:
    """The tokens per decode step ``u[s]`` and their running sum ``C[s] = u[0] + ... + u[s - 1]``."""

    def __init__(self, spec_tokens: int = 0, acceptance: float = 0.0, seed: int = 0) -> None:
        self.k = spec_tokens
        self.acceptance = acceptance
        self.fixed = 0  # what every step yields when nothing is drawn (no speculation, or a sure answer)
        if spec_tokens == 0 or acceptance == 0.0:
            self.fixed = 1
        elif acceptance == 1.0:
            self.fixed = 1 + spec_tokens
        self._rng = np.random.default_rng((seed, 0x5BEC))
        self._u = np.zeros(0, dtype=np.int64)
        self._cum = np.zeros(1, dtype=np.int64)
        self._cum_list: list[int] = [0]

    def _grow(self, steps: int) -> None:
        while len(self._cum) <= steps:
            u = 1 + self._rng.binomial(self.k, self.acceptance, size=_CHUNK).astype(np.int64)
            self._u = np.concatenate((self._u, u))
            cum = self._cum[-1] + np.cumsum(u)
            self._cum = np.concatenate((self._cum, cum))
            self._cum_list.extend(cum.tolist())

    def cum(self, s: int) -> int:
        """``C[s]``: the tokens of steps 0 .. s-1."""
        if self.fixed:
            return self.fixed * s
        if s >= len(self._cum_list):
            self._grow(s)
        return self._cum_list[s]

    def per_step(self, s: int) -> int:
        """``u[s]``: the tokens step ``s`` yields to each decoding request."""
        return self.cum(s + 1) - self.cum(s)

    def first_reaching(self, target: int, lo: int) -> int:
        """The first step ``s >= lo`` with ``C[s] >= target``."""
        if self.fixed:
            return max(lo, -(-target // self.fixed))
        while self._cum[-1] < target:
            self._grow(len(self._cum) + _CHUNK - 1)
        return max(lo, int(np.searchsorted(self._cum, target, side="left")))

    def cum_range(self, a: int, b: int) -> np.ndarray:
        """``C[a:b]`` as an array."""
        if self.fixed:
            return np.arange(a, b, dtype=np.int64) * self.fixed
        self._grow(b)
        return self._cum[a:b]

    def per_step_range(self, a: int, b: int) -> np.ndarray:
        """``u[a:b]`` as an array."""
        if self.fixed:
            return np.full(b - a, self.fixed, dtype=np.int64)
        self._grow(b)
        return self._u[a:b]
