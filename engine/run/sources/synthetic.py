"""The ``synthetic`` source: prompts of exact or drawn lengths cut from the default corpus
(random token ids for synthetic weights, which have no tokenizer), seeded by the workload's seed.

Fixed lengths: every prompt has ``prompt_tokens`` tokens, a window of the tokenized corpus at a
seeded offset. Drawn lengths (``prompt_length`` uniform or normal with a relative
``prompt_length_spread``): each length is drawn (seed + 1), then its window (seed). The
``prefixes`` source puts one of a few shared prefixes before each such prompt
(:mod:`engine.run.sources.prefixes`).
"""

from __future__ import annotations

import numpy as np

from engine.backends.base import Tokenizer
from engine.data.corpus import default_corpus
from engine.run.plan import RequestPlan, plan_of
from engine.run.sources import PlanContext
from engine.spec import Workload
from engine.spec.sources.synthetic import SyntheticLengths, SyntheticTraffic


def prompt_lengths(lengths: SyntheticLengths, seed: int, count: int) -> list[int]:
    """Prompt lengths in tokens: fixed, or drawn (seeded) uniform/normal around ``prompt_tokens``."""
    n = lengths.prompt_tokens
    spread = lengths.prompt_length_spread
    if lengths.prompt_length == "fixed" or spread == 0:
        return [n] * count
    rng = np.random.default_rng(seed + 1)
    if lengths.prompt_length == "uniform":
        lo, hi = max(1, round(n * (1 - spread))), max(1, round(n * (1 + spread)))
        return rng.integers(lo, hi + 1, size=count).tolist()
    draws = rng.normal(n, n * spread, size=count)
    return [max(1, round(v)) for v in draws]


def synthetic_prompts(
    lengths: SyntheticLengths, seed: int, count: int, tokenizer: Tokenizer | None, vocab_size: int
) -> list[list[int]]:
    """``count`` prompts as token ids (the same ids for the same workload, run after run)."""
    rng = np.random.default_rng(seed)
    if lengths.prompt_length == "fixed":
        n = lengths.prompt_tokens
        if tokenizer is None:
            return [rng.integers(0, vocab_size, size=n).tolist() for _ in range(count)]
        ids = _long_enough(corpus_token_ids(tokenizer), n)
        starts = rng.integers(0, len(ids) - n, size=count)
        return [ids[s : s + n] for s in starts]
    drawn = prompt_lengths(lengths, seed, count)
    if tokenizer is None:
        return [rng.integers(0, vocab_size, size=n).tolist() for n in drawn]
    ids = _long_enough(corpus_token_ids(tokenizer), max(drawn))
    return [ids[(s := int(rng.integers(0, len(ids) - n))) : s + n] for n in drawn]


def _long_enough(ids: list[int], n: int) -> list[int]:
    while len(ids) < n + 1:
        ids = ids + ids
    return ids


_CACHE: dict[int, list[int]] = {}


def corpus_token_ids(tokenizer: Tokenizer) -> list[int]:
    """The default corpus tokenized once per tokenizer."""
    key = id(tokenizer)
    if key not in _CACHE:
        _CACHE[key] = tokenizer.encode(default_corpus(), add_special_tokens=False)
    return _CACHE[key]


def synthetic_facts(traffic: SyntheticLengths, workload: Workload, ctx: PlanContext | None) -> dict[str, object]:
    """What synthetic prompts send (pre-flight checks their length against the model's context)."""
    return {"requests": workload.requests}


class SyntheticSource:
    """Exact or drawn prompt lengths; every request asks for ``output_tokens``."""

    name = "synthetic"

    def check(self, traffic: SyntheticTraffic, workload: Workload, ctx: PlanContext | None) -> dict[str, object]:
        """Nothing to read: synthetic prompts come from the default corpus; their longest must fit the context."""
        return synthetic_facts(traffic, workload, ctx)

    def plan(self, traffic: SyntheticTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        count = workload.warmup + workload.requests
        prompts = synthetic_prompts(traffic, workload.seed, count, ctx.tokenizer, ctx.vocab_size)
        return plan_of(self.name, prompts, workload.output_tokens, workload.warmup, workload.ignore_eos)
