"""The ``prompt_file`` source: a user's prompts, one per line or JSONL objects with a ``prompt``
(or ``text``) field, tokenized and cycled to the workload's number of requests."""

from __future__ import annotations

from engine.data.prompts import read_prompts
from engine.jsonvalue import JSONObject
from engine.run.plan import RequestPlan, plan_of
from engine.run.sources import PlanContext
from engine.spec import SpecError, Workload
from engine.spec.sources.prompt_file import PromptFileTraffic


class PromptFileSource:
    """Prompts of a file, tokenized with the model's tokenizer and cycled."""

    name = "prompt_file"

    def check(self, traffic: PromptFileTraffic, workload: Workload, ctx: PlanContext | None) -> JSONObject:
        """Read the prompt file now (exists, UTF-8, at least one prompt), so a bad one fails before loading; with the
        model's light tokenizer, the whole plan (a prompt beyond the context refused with strict lengths)."""
        texts = read_prompts(traffic.prompt_file)  # bounded, streamed, every line checked (engine/data/prompts.py)
        if ctx is not None and ctx.tokenizer is not None:
            from engine.run.sources import plan_requests

            plan_requests(workload, ctx)  # a prompt beyond the context: refused here, in one line
        return {"requests": workload.requests, "prompts": len(texts)}

    def plan(self, traffic: PromptFileTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        if ctx.tokenizer is None:
            raise SpecError("a prompt file needs a model with a tokenizer (synthetic weights have none)")
        texts = read_prompts(traffic.prompt_file, most=workload.warmup + workload.requests)
        encoded = [ctx.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        count = workload.warmup + workload.requests
        prompts = [encoded[i % len(encoded)] for i in range(count)]
        return plan_of(self.name, prompts, workload.output_tokens, workload.warmup, workload.ignore_eos)
