"""The ``synthetic`` source: prompts of exact or drawn lengths cut from the default corpus
(random token ids for synthetic weights, which have no tokenizer), seeded by the workload's seed.

Fixed lengths: every prompt has ``prompt_tokens`` tokens, a window of the tokenized corpus at a
seeded offset. Drawn lengths (``prompt_length`` uniform or normal with a relative
``prompt_length_spread``): each length is drawn (seed + 1), then its window (seed). With shared
prefixes (``prefix_count``, ``prefix_tokens``) each prompt is one of the prefixes followed by
its own ``prompt_tokens`` (:mod:`engine.run.sources.prefixes`).
"""

from __future__ import annotations

import numpy as np

from engine.backends.base import Tokenizer
from engine.data.corpus import default_corpus
from engine.run.plan import RequestPlan, plan_of
from engine.run.sources import PlanContext
from engine.run.sources.prefixes import prefix_choices, shared_prefixes
from engine.spec import Workload


def prompt_lengths(workload: Workload, count: int) -> list[int]:
    """Prompt lengths in tokens: fixed, or drawn (seeded) uniform/normal around ``prompt_tokens``."""
    n = int(workload.prompt_tokens or 1)
    spread = workload.prompt_length_spread
    if workload.prompt_length == "fixed" or spread == 0:
        return [n] * count
    rng = np.random.default_rng(workload.seed + 1)
    if workload.prompt_length == "uniform":
        lo, hi = max(1, round(n * (1 - spread))), max(1, round(n * (1 + spread)))
        return rng.integers(lo, hi + 1, size=count).tolist()
    draws = rng.normal(n, n * spread, size=count)
    return [max(1, round(v)) for v in draws]


def synthetic_prompts(workload: Workload, count: int, tokenizer: Tokenizer | None, vocab_size: int) -> list[list[int]]:
    """``count`` prompts as token ids (the same ids for the same workload, run after run)."""
    rng = np.random.default_rng(workload.seed)
    if workload.prompt_length == "fixed":
        n = int(workload.prompt_tokens or 1)
        if tokenizer is None:
            return [rng.integers(0, vocab_size, size=n).tolist() for _ in range(count)]
        ids = _long_enough(corpus_token_ids(tokenizer), n)
        starts = rng.integers(0, len(ids) - n, size=count)
        return [ids[s : s + n] for s in starts]
    lengths = prompt_lengths(workload, count)
    if tokenizer is None:
        return [rng.integers(0, vocab_size, size=n).tolist() for n in lengths]
    ids = _long_enough(corpus_token_ids(tokenizer), max(lengths))
    return [ids[(s := int(rng.integers(0, len(ids) - n))) : s + n] for n in lengths]


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


class SyntheticSource:
    """Exact or drawn prompt lengths; every request asks for ``output_tokens``."""

    name = "synthetic"

    def plan(self, workload: Workload, ctx: PlanContext) -> RequestPlan:
        count = workload.warmup + workload.requests
        prompts = synthetic_prompts(workload, count, ctx.tokenizer, ctx.vocab_size)
        facts: dict[str, object] = {}
        if workload.prefix_count:
            pool = corpus_token_ids(ctx.tokenizer) if ctx.tokenizer is not None else None
            prefixes = shared_prefixes(workload, pool, ctx.vocab_size)
            picks = prefix_choices(workload, count)
            prompts = [prefixes[k] + p for k, p in zip(picks, prompts, strict=True)]
            facts = {"prefixes": len(prefixes), "prefix_share": _share(workload.prefix_tokens or 0, prompts)}
        return plan_of(self.name, prompts, workload.output_tokens, workload.warmup, workload.ignore_eos, facts)


def _share(prefix_tokens: int, prompts: list[list[int]]) -> float:
    """The share of prompt tokens that are a shared prefix."""
    total = sum(len(p) for p in prompts)
    return round(prefix_tokens * len(prompts) / total, 4) if total else 0.0
