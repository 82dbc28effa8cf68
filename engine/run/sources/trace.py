"""The ``trace`` source: a production trace replayed on its own schedule (Mooncake JSONL, the Azure
LLM inference trace CSV, BurstGPT CSV), read streamed (:mod:`engine.data.traces`).

Each row is one request due at its time (``time_scale`` x faster; only ``trace_start_s`` ..
``+ trace_duration_s`` of the trace, re-based to 0), with the row's input length and, with
``source_output_lengths``, its output length. ``requests`` caps how many rows are replayed.
A Mooncake row's ``hash_ids`` make its prompt: one block of 512 tokens per id, equal ids giving
equal blocks (cut from the default corpus at a seeded offset per id), so requests share prefixes
as they did in production and a server's prefix cache sees them again. Rows without hash ids get a
prompt of their own. A row beyond the model's context is clipped and counted (refused with
``strict_lengths``). Warm-up requests take the first rows' shapes with blocks of their own, so
they warm the engine without filling its prefix cache with the measured prefixes.
"""

from __future__ import annotations

from engine.backends.base import Request
from engine.data.hash_blocks import prompt_ids_from_hash_ids
from engine.data.traces import TraceRow, read_trace, time_scale
from engine.run.plan import PlannedRequest, RequestPlan
from engine.run.sources import PlanContext
from engine.run.sources.chat import refuse_or_fit
from engine.run.sources.synthetic import corpus_token_ids
from engine.spec import SpecError, Workload
from engine.spec.sources.trace import TraceTraffic

BLOCK_TOKENS = 512  # Mooncake: one hash id per 512-token block
_WARMUP_SEED = 1_000_003  # warm-up blocks differ from every measured block


def _prompt(row: TraceRow, i: int, seed: int, pool: list[int] | None, vocab_size: int) -> list[int]:
    """A row's prompt: its hash ids' shared blocks, or a prompt of its own (seeded by its index)."""
    if row.hash_ids:
        return prompt_ids_from_hash_ids(row.hash_ids, row.input_tokens, BLOCK_TOKENS, pool, seed, vocab_size)
    own = (1 << 40) + i  # a block id no trace row uses: a prompt shared with nobody
    blocks = [own * 64 + b for b in range(-(-row.input_tokens // BLOCK_TOKENS))]
    return prompt_ids_from_hash_ids(blocks, row.input_tokens, BLOCK_TOKENS, pool, seed, vocab_size)


class TraceSource:
    """A trace's requests on the trace's schedule."""

    name = "trace"

    def check(self, traffic: TraceTraffic, workload: Workload) -> None:
        """The trace's first rows, before any model loads (the rest is read while the plan is made)."""
        from itertools import islice

        from engine.data.reading import existing_file
        from engine.data.traces import trace_format

        entries = trace_format(traffic.trace_format).entries(existing_file(traffic.trace, "trace"))
        if not list(islice(entries, 100)):
            raise SpecError(f"trace {traffic.trace} holds no rows")

    def plan(self, traffic: TraceTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        trace = read_trace(
            traffic.trace,
            traffic.trace_format,
            start_s=traffic.trace_start_s,
            duration_s=traffic.trace_duration_s,
            max_rows=workload.requests,
        )
        rows = time_scale(trace.rows, traffic.time_scale)
        pool = corpus_token_ids(ctx.tokenizer) if ctx.tokenizer is not None else None
        planned, clipped = [], 0
        for i, row in enumerate(rows):
            out = row.output_tokens if traffic.source_output_lengths else workload.output_tokens
            ids = _prompt(row, i, workload.seed, pool, ctx.vocab_size)
            ids, out, cut = refuse_or_fit(ids, out, ctx.context_length, workload.strict_lengths, row.where)
            clipped += cut
            planned.append(PlannedRequest(Request(ids, out, workload.ignore_eos), due_s=row.at_s))
        warm = [
            PlannedRequest(
                Request(
                    _prompt(row, i, workload.seed + _WARMUP_SEED, pool, ctx.vocab_size)[: len(p.request.prompt)],
                    p.output_tokens,
                    workload.ignore_eos,
                )
            )
            for i, (row, p) in enumerate(zip(rows[: workload.warmup], planned, strict=False))
        ]
        facts = {
            "trace": traffic.trace,
            "format": traffic.trace_format,
            "rows": len(rows),
            "duration_s": round(float(rows[-1].at_s), 3) if rows else 0.0,
            **({"skipped": trace.skipped} if trace.skipped else {}),
            **({"clipped": clipped} if clipped else {}),
            "shared_blocks": _shared_blocks(rows),
        }
        return RequestPlan(self.name, warm, planned, facts)


def _shared_blocks(rows: list[TraceRow]) -> float:
    """The share of prompt blocks whose hash id an earlier row already sent (what a prefix cache could reuse)."""
    seen: set[int] = set()
    total = again = 0
    for row in rows:
        for h in row.hash_ids or ():
            total += 1
            again += h in seen
            seen.add(h)
    return round(again / total, 4) if total else 0.0
