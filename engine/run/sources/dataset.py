"""The ``dataset`` source: one request per sampled conversation of a dataset (ShareGPT, OpenAI chat,
a text column; a local file or folder, or ``hf:ID[:SPLIT]``), read streamed (:mod:`engine.data`).

A request is a conversation's first user turn with its system turn, if any (and a shared prefix
as a system message, with ``prefix_count``), rendered by the model's chat template; its output
length is the token length of the dataset's reply to that turn (``source_output_lengths``; else
``output_tokens``, as for a conversation without a reply). Conversations are sampled seeded,
``warmup + requests`` of them (reservoir sampling: a dataset of any size in bounded memory),
keeping those whose prompt lies within ``min_prompt_tokens``/``max_prompt_tokens``; a dataset with
fewer than that is cycled, and says so. A prompt beyond the context is clipped and counted
(refused with ``strict_lengths``).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.backends.base import Request, Tokenizer
from engine.data.conversations import Conversation, first_reply, first_request, read_conversations
from engine.data.sampling import reservoir_sample
from engine.jsonvalue import JSONObject
from engine.run.plan import PlannedRequest, RequestPlan
from engine.run.sources import PlanContext
from engine.run.sources.chat import chat_ids, messages_of, refuse_or_fit
from engine.run.sources.prefixes import prefix_choices, prefix_text, shared_prefixes
from engine.run.sources.synthetic import corpus_token_ids
from engine.spec import SpecError, Workload
from engine.spec.sources.dataset import DatasetTraffic
from engine.spec.sources.sessions import SessionsTraffic

Conversations = DatasetTraffic | SessionsTraffic  # the sources that read a dataset's conversations


def needs_tokenizer(ctx: PlanContext, what: str) -> Tokenizer:
    """The model's tokenizer; a dataset or session needs one (synthetic weights have none)."""
    if ctx.tokenizer is None:
        raise SpecError(f"{what} needs a model with a tokenizer (synthetic weights have none)")
    return ctx.tokenizer


def sample(
    traffic: Conversations, seed: int, count: int, keep: Callable[[Conversation], bool] | None
) -> tuple[list[Conversation], JSONObject]:
    """``count`` conversations sampled seeded (cycled when the dataset has fewer), and what was counted."""
    column = traffic.dataset_column if isinstance(traffic, DatasetTraffic) else None
    stream = read_conversations(traffic.dataset, traffic.dataset_format, column)
    chosen = reservoir_sample(stream, count, seed, keep)
    facts: JSONObject = {"dataset": traffic.dataset, "records_read": stream.read, **_skipped(stream.skipped)}
    if not chosen:
        raise SpecError(f"dataset {traffic.dataset}: no conversation fits the prompt length limits")
    if len(chosen) < count:
        facts["cycled"] = f"{len(chosen)} conversations kept, cycled to {count} requests"
        chosen = [chosen[i % len(chosen)] for i in range(count)]
    return chosen, facts


def check_conversations(traffic: Conversations, workload: Workload, ctx: PlanContext | None) -> JSONObject:
    """The dataset read through before any model loads: with the model's light tokenizer, the job's whole plan
    (every record, the prompt limits, the context); without one, every record of a local file (a Hub dataset: its
    first record and reachability, nothing downloaded beyond it). One line naming the record that fails."""
    from engine.data.conversations import check_dataset
    from engine.run.sources import plan_requests

    column = traffic.dataset_column if isinstance(traffic, DatasetTraffic) else None
    check_dataset(traffic.dataset, traffic.dataset_format, column)
    if ctx is not None and ctx.tokenizer is not None:
        plan = plan_requests(workload, ctx)
        return {"requests": len(plan.measured), **{k: v for k, v in plan.facts.items() if k != "dataset"}}
    if traffic.dataset.startswith("hf:"):
        return {"requests": workload.requests}
    stream = read_conversations(traffic.dataset, traffic.dataset_format, column)
    count = sum(1 for _ in stream)
    if not count:
        raise SpecError(f"dataset {traffic.dataset}: no record can be sent ({_skipped(stream.skipped) or 'none read'})")
    return {"requests": workload.requests, "records_read": stream.read, **_skipped(stream.skipped)}


def _skipped(skipped: dict[str, int]) -> JSONObject:
    return {"skipped": dict(skipped)} if skipped else {}


def length_filter(traffic: DatasetTraffic, tokenizer: Tokenizer) -> Callable[[Conversation], bool] | None:
    """The prompt-length filter of the dataset's options (None without limits: nothing is tokenized to sample)."""
    lo, hi = traffic.min_prompt_tokens, traffic.max_prompt_tokens
    if lo is None and hi is None:
        return None

    def keep(conversation: Conversation) -> bool:
        n = len(chat_ids(tokenizer, messages_of(first_request(conversation))))
        return (lo is None or n >= lo) and (hi is None or n <= hi)

    return keep


def output_length(traffic: Conversations, workload: Workload, tokenizer: Tokenizer, reply: str | None) -> int:
    """The dataset's reply length in tokens (at least 1), or ``output_tokens``."""
    if not traffic.source_output_lengths or not reply:
        return workload.output_tokens
    return max(1, len(tokenizer.encode(reply, add_special_tokens=False)))


class DatasetSource:
    """Single requests from a dataset's conversations."""

    name = "dataset"

    def check(self, traffic: DatasetTraffic, workload: Workload, ctx: PlanContext | None) -> JSONObject:
        return check_conversations(traffic, workload, ctx)

    def plan(self, traffic: DatasetTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        tokenizer = needs_tokenizer(ctx, f"dataset {traffic.dataset}")
        count = workload.warmup + workload.requests
        chosen, facts = sample(traffic, workload.seed, count, length_filter(traffic, tokenizer))
        k, n = traffic.prefix_count or 0, traffic.prefix_tokens or 0
        prefixes = shared_prefixes(k, n, workload.seed, corpus_token_ids(tokenizer), ctx.vocab_size) if k else []
        picks = prefix_choices(k, workload.seed, count)
        planned, clipped = [], 0
        for i, conversation in enumerate(chosen):
            messages = messages_of(first_request(conversation))
            if prefixes:
                messages = ({"role": "system", "content": prefix_text(tokenizer, prefixes[picks[i]])}, *messages)
            ids, out, cut = refuse_or_fit(
                chat_ids(tokenizer, messages),
                output_length(traffic, workload, tokenizer, first_reply(conversation)),
                ctx.context_length,
                workload.strict_lengths,
                conversation.where,
            )
            clipped += cut
            request = Request(prompt=ids, max_new_tokens=out, ignore_eos=workload.ignore_eos, messages=messages)
            planned.append(PlannedRequest(request))
        if clipped:
            facts["clipped"] = clipped
        return RequestPlan(self.name, planned[: workload.warmup], planned[workload.warmup :], facts)
