"""The ``sessions`` source (``multi_turn``): each sampled conversation of a dataset is a session that
sends its user turns in order, each carrying the conversation so far with the replies the engine
actually returned (the driver builds those prompts when the turns are due).

``requests`` counts turns: sessions are taken in their seeded order until they hold that many
(the last one cut). Each turn asks for the token length of the dataset's reply to it
(``source_output_lengths``; else ``output_tokens``). Warm-up requests are single first turns of
other conversations. Between a reply and the next turn the user thinks ``think_time_s`` on
average (exponential gaps, seeded per session: :mod:`engine.run.driver`).
"""

from __future__ import annotations

from engine.backends.base import Request
from engine.data.conversations import system_messages, turns
from engine.run.plan import PlannedRequest, RequestPlan
from engine.run.sources import PlanContext
from engine.run.sources.chat import chat_ids, messages_of, refuse_or_fit, session_chat_ids
from engine.run.sources.dataset import check_conversations, needs_tokenizer, output_length, sample
from engine.spec import Workload
from engine.spec.sources.sessions import SessionsTraffic


class SessionsSource:
    """Multi-turn sessions from a dataset's conversations."""

    name = "sessions"

    def check(self, traffic: SessionsTraffic, workload: Workload, ctx: PlanContext | None) -> dict[str, object]:
        return check_conversations(traffic, workload, ctx)

    def plan(self, traffic: SessionsTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        tokenizer = needs_tokenizer(ctx, f"multi-turn dataset {traffic.dataset}")
        chosen, facts = sample(traffic, workload.seed, workload.warmup + workload.requests, None)
        warm, measured, sessions = [], [], 0
        longest = workload.output_tokens
        for conversation in chosen:
            system = messages_of(system_messages(conversation))
            pairs = turns(conversation)
            if len(warm) < workload.warmup:  # a single first turn, not a session
                first = (*system, {"role": "user", "content": pairs[0].user})
                ids, out, _ = refuse_or_fit(
                    chat_ids(tokenizer, first), output_length(traffic, workload, tokenizer, pairs[0].reply), ctx.context_length,
                    workload.strict_lengths, conversation.where,
                )  # fmt: skip
                warm.append(PlannedRequest(Request(ids, out, workload.ignore_eos, messages=first)))
                continue
            if len(measured) >= workload.requests:
                break
            for t, pair in enumerate(pairs[: workload.requests - len(measured)]):
                out = output_length(traffic, workload, tokenizer, pair.reply)
                longest = max(longest, out)
                user = {"role": "user", "content": pair.user}
                messages = (*system, user) if t == 0 else (user,)
                ids = chat_ids(tokenizer, messages) if t == 0 else []  # later turns: built when due
                if t == 0:
                    ids, out, _ = refuse_or_fit(
                        ids, out, ctx.context_length, workload.strict_lengths, conversation.where
                    )
                request = Request(ids, out, workload.ignore_eos, messages=messages, want_text=True)
                measured.append(PlannedRequest(request, session=sessions, turn=t))
            sessions += 1
        facts.update(sessions=sessions, turns=len(measured))
        return RequestPlan(
            self.name,
            warm,
            measured,
            facts,
            chat_ids=session_chat_ids(tokenizer, ctx.context_length, longest),
            think_time_s=traffic.think_time_s,
        )
