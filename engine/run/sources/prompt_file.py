"""The ``prompt_file`` source: a user's prompts, one per line or JSONL objects with a ``prompt``
(or ``text``) field, tokenized and cycled to the workload's number of requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.run.plan import RequestPlan, plan_of
from engine.run.sources import PlanContext
from engine.spec import SpecError, Workload
from engine.spec.sources.prompt_file import PromptFileTraffic


def read_prompt_file(path: str) -> list[str]:
    """One prompt per line, or JSONL objects with a ``prompt`` (or ``text``) field."""
    file = Path(path).expanduser()
    if file.is_dir():
        raise SpecError(f"prompt file {file} is a folder, not a file")
    if not file.is_file():
        raise SpecError(f"prompt file {file} does not exist")
    try:
        lines = [ln for ln in file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except UnicodeDecodeError as exc:
        raise SpecError(f"prompt file {file} is not UTF-8 text") from exc
    prompts = []
    for number, ln in enumerate(lines, start=1):
        if ln.lstrip().startswith("{"):
            try:
                obj = json.loads(ln)
            except json.JSONDecodeError as exc:
                raise SpecError(f"prompt file {file}: a line starting with '{{' is not valid JSON") from exc
            text = obj.get("prompt") or obj.get("text") if isinstance(obj, dict) else None
            if not isinstance(text, str):
                raise SpecError(f"prompt file {file}: JSON lines need a 'prompt' string (prompt {number})")
            prompts.append(text)
        else:
            prompts.append(ln)
    if not prompts:
        raise SpecError(f"prompt file {file} holds no prompts")
    return prompts


class PromptFileSource:
    """Prompts of a file, tokenized with the model's tokenizer and cycled."""

    name = "prompt_file"

    def check(self, traffic: PromptFileTraffic, workload: Workload, ctx: PlanContext | None) -> dict[str, Any]:
        """Read the prompt file now (exists, UTF-8, at least one prompt), so a bad one fails before loading; with the
        model's light tokenizer, the whole plan (a prompt beyond the context refused with strict lengths)."""
        try:
            texts = read_prompt_file(traffic.prompt_file)
        except (RecursionError, OSError) as exc:
            raise SpecError(f"prompt file {traffic.prompt_file} cannot be read: {type(exc).__name__}") from exc
        if ctx is not None and ctx.tokenizer is not None:
            from engine.run.sources import plan_requests

            plan_requests(workload, ctx)  # a prompt beyond the context: refused here, in one line
        return {"requests": workload.requests, "prompts": len(texts)}

    def plan(self, traffic: PromptFileTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        if ctx.tokenizer is None:
            raise SpecError("a prompt file needs a model with a tokenizer (synthetic weights have none)")
        texts = read_prompt_file(traffic.prompt_file)
        encoded = [ctx.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        count = workload.warmup + workload.requests
        prompts = [encoded[i % len(encoded)] for i in range(count)]
        return plan_of(self.name, prompts, workload.output_tokens, workload.warmup, workload.ignore_eos)
