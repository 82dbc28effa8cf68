"""The ``prefixes`` source, and shared prefixes for datasets: K system prompts of N tokens, cut from the default
corpus at seeded offsets; each request takes one (seeded), so a prefix cache sees them again. The ``prefixes``
source puts one before each synthetic prompt (:mod:`engine.run.sources.synthetic`)."""

from __future__ import annotations

import numpy as np

from engine.backends.base import Tokenizer
from engine.run.plan import RequestPlan, plan_of
from engine.run.sources import PlanContext
from engine.run.sources.synthetic import corpus_token_ids, synthetic_facts, synthetic_prompts
from engine.spec import Workload
from engine.spec.sources.prefixes import PrefixesTraffic


def shared_prefixes(count: int, tokens: int, seed: int, pool: list[int] | None, vocab_size: int) -> list[list[int]]:
    """The K prefixes as token ids (random ids from the vocabulary when there is no tokenizer's pool)."""
    rng = np.random.default_rng(seed + 3)
    if pool is None:
        return [rng.integers(0, vocab_size, size=tokens).tolist() for _ in range(count)]
    while len(pool) < tokens + 1:
        pool = pool + pool
    return [pool[s : s + tokens] for s in rng.integers(0, len(pool) - tokens, size=count)]


def prefix_choices(prefixes: int, seed: int, count: int) -> list[int]:
    """Which of ``prefixes`` prefixes each of ``count`` requests takes (seeded)."""
    if not prefixes:
        return []
    return np.random.default_rng(seed + 4).integers(0, prefixes, size=count).tolist()


def prefix_text(tokenizer: Tokenizer, prefix: list[int]) -> str:
    """A prefix as the text of a system message (datasets send messages)."""
    return tokenizer.decode(prefix, skip_special_tokens=True)


class PrefixesSource:
    """Synthetic prompts, each behind one of the shared prefixes."""

    name = "prefixes"

    def check(self, traffic: PrefixesTraffic, workload: Workload, ctx: PlanContext | None) -> dict[str, object]:
        """Nothing to read: synthetic prompts come from the default corpus; their longest must fit the context."""
        return synthetic_facts(traffic, workload, ctx)

    def plan(self, traffic: PrefixesTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        count = workload.warmup + workload.requests
        prompts = synthetic_prompts(traffic, workload.seed, count, ctx.tokenizer, ctx.vocab_size)
        pool = corpus_token_ids(ctx.tokenizer) if ctx.tokenizer is not None else None
        prefixes = shared_prefixes(traffic.prefix_count, traffic.prefix_tokens, workload.seed, pool, ctx.vocab_size)
        picks = prefix_choices(traffic.prefix_count, workload.seed, count)
        prompts = [prefixes[k] + p for k, p in zip(picks, prompts, strict=True)]
        facts = {"prefixes": len(prefixes), "prefix_share": _share(traffic.prefix_tokens, prompts)}
        return plan_of(self.name, prompts, workload.output_tokens, workload.warmup, workload.ignore_eos, facts)


def _share(prefix_tokens: int, prompts: list[list[int]]) -> float:
    """The share of prompt tokens that are a shared prefix."""
    total = sum(len(p) for p in prompts)
    return round(prefix_tokens * len(prompts) / total, 4) if total else 0.0
