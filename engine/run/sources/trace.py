"""The ``trace`` source: a production trace replayed on its own schedule (Mooncake JSONL, the Azure
LLM inference trace CSV, BurstGPT CSV), read streamed (:mod:`engine.data.traces`).

Each row is one request due at its time (``time_scale`` x faster; only ``trace_start_s`` ..
``+ trace_duration_s`` of the trace, re-based to 0), with the row's input length and, with
``source_output_lengths``, its output length. ``requests`` caps how many rows are replayed; a cap
that leaves rows of the window out says so (``capped``: the rows and seconds replayed of the
window's). A Mooncake row's ``hash_ids`` make its prompt: one block of 512 tokens per id, equal
ids giving equal blocks (cut from the default corpus at a seeded offset per id), so requests share
prefixes as they did in production and a server's prefix cache sees them again. Rows without hash
ids get a prompt of their own.

**Scaled to the model at hand.** ``input_scale`` multiplies every prompt length and the block size
with it (a 512-token block becomes a 51-token one at 0.1: the hash-block structure, hence the share
of prompt tokens a prefix cache can reuse, is kept), ``output_scale`` every output length;
``min_prompt_tokens``/``max_prompt_tokens`` then leave rows out (counted), before the row cap. A row
beyond the model's context is clipped and counted (refused with ``strict_lengths``). Warm-up
requests take the first rows' shapes with blocks of their own, so they warm the engine without
filling its prefix cache with the measured prefixes.

:meth:`TraceSource.check` reads the whole file before any model loads (:func:`engine.data.traces.scan_trace`)
and refuses, in one line, a window with nothing to replay, every row filtered out, a row beyond the
context with ``strict_lengths``, and a schedule longer than :data:`MAX_SCHEDULE_S` (naming the options
that shorten it).
"""

from __future__ import annotations

import numpy as np

from engine.backends.base import Request
from engine.data.hash_blocks import prompt_ids_from_hash_ids
from engine.data.traces import Trace, TraceRow, TraceScan, read_trace, scan_trace, time_scale
from engine.jsonvalue import JSONObject
from engine.run.plan import PlannedRequest, RequestPlan
from engine.run.sources import PlanContext
from engine.run.sources.chat import refuse_or_fit
from engine.run.sources.synthetic import corpus_token_ids
from engine.spec import SpecError, Workload
from engine.spec.sources.trace import TraceTraffic

BLOCK_TOKENS = 512  # Mooncake: one hash id per 512-token block
MAX_SCHEDULE_S = 3600.0  # a replay longer than this is refused unless a window or a time scale shortens it
_WARMUP_SEED = 1_000_003  # warm-up blocks differ from every measured block


def block_tokens(traffic: TraceTraffic) -> int:
    """Tokens per hash block once the prompts are scaled (512 at scale 1)."""
    return max(1, round(BLOCK_TOKENS * traffic.input_scale))


def scaled(row: TraceRow, traffic: TraceTraffic) -> TraceRow:
    """The row with its lengths scaled (at least one token each; a prompt never beyond its blocks)."""
    tokens = max(1, round(row.input_tokens * traffic.input_scale))
    if row.hash_ids:
        tokens = min(tokens, len(row.hash_ids) * block_tokens(traffic))
    out = max(1, round(row.output_tokens * traffic.output_scale))
    return TraceRow(row.at_s, tokens, out, row.hash_ids, row.where)


def kept(tokens: int, traffic: TraceTraffic) -> bool:
    """Whether a scaled prompt length lies within the options' limits."""
    lo, hi = traffic.min_prompt_tokens, traffic.max_prompt_tokens
    return (lo is None or tokens >= lo) and (hi is None or tokens <= hi)


def _prompt(row: TraceRow, i: int, seed: int, pool: list[int] | None, vocab_size: int, block: int) -> list[int]:
    """A row's prompt: its hash ids' shared blocks, or a prompt of its own (seeded by its index)."""
    if row.hash_ids:
        return prompt_ids_from_hash_ids(row.hash_ids, row.input_tokens, block, pool, seed, vocab_size)
    own = (1 << 40) + i  # a block id no trace row uses: a prompt shared with nobody
    blocks = [own * 64 + b for b in range(-(-row.input_tokens // block))]
    return prompt_ids_from_hash_ids(blocks, row.input_tokens, block, pool, seed, vocab_size)


class TraceSource:
    """A trace's requests on the trace's schedule."""

    name = "trace"

    def check(self, traffic: TraceTraffic, workload: Workload, ctx: PlanContext | None) -> JSONObject:
        """The whole file read through before any model loads: what the replay sends, or one line why it cannot."""
        scan = scan_trace(
            traffic.trace, traffic.trace_format, start_s=traffic.trace_start_s, duration_s=traffic.trace_duration_s
        )
        inputs = np.maximum(1, np.rint(np.frombuffer(scan.inputs, dtype=np.int64) * traffic.input_scale))
        lo, hi = traffic.min_prompt_tokens or 1, traffic.max_prompt_tokens or np.iinfo(np.int64).max
        left = np.flatnonzero((inputs >= lo) & (inputs <= hi))
        if not left.size:
            raise SpecError(f"trace {traffic.trace}: every one of its {scan.rows:,} rows is outside the prompt limits")
        replayed = left[: workload.requests]
        outputs = np.maximum(1, np.rint(np.frombuffer(scan.outputs, dtype=np.int64) * traffic.output_scale))
        out = outputs[replayed] if traffic.source_output_lengths else np.full(replayed.size, workload.output_tokens)
        context = ctx.context_length if ctx is not None else None
        if workload.strict_lengths and context is not None and np.any(inputs[replayed] + out > context):
            i = int(np.argmax(inputs[replayed] + out > context))
            raise SpecError(
                f"trace {traffic.trace}: its window's row {int(replayed[i]) + 1:,} has {int(inputs[replayed][i]):,} "
                f"prompt tokens (scaled) plus {int(out[i]):,} output tokens, beyond the model's context of "
                f"{context:,}; scale the lengths down (--length-scale), leave long rows out (--max-prompt-tokens) "
                "or drop --strict to clip them"
            )
        seconds = float(np.frombuffer(scan.due_s)[replayed[-1]]) / traffic.time_scale
        return self._facts(traffic, scan, replayed.size, scan.rows - left.size, seconds)

    def _facts(self, traffic: TraceTraffic, scan: TraceScan, n: int, filtered: int, seconds: float) -> JSONObject:
        if seconds > MAX_SCHEDULE_S:
            raise SpecError(
                f"trace {traffic.trace}: replaying {n:,} rows would take {seconds / 3600:,.1f} h (its longest gap "
                f"between rows is {scan.gap_s / traffic.time_scale:,.0f} s, before {scan.gap_where}); at most 1 h is "
                f"replayed: choose a window (--trace-window START:DURATION) or a speed-up (--time-scale "
                f"{int(seconds // MAX_SCHEDULE_S) + 1} replays it in under an hour)"
            )
        facts: JSONObject = {"requests": n, "duration_s": round(seconds, 3), "window_rows": scan.rows}
        if filtered:
            facts["filtered"] = filtered
        if n < scan.rows - filtered:
            facts["capped"] = f"{n:,} of the window's {scan.rows - filtered:,} rows (requests={n:,})"
        return facts

    def plan(self, traffic: TraceTraffic, workload: Workload, ctx: PlanContext) -> RequestPlan:
        filtering = traffic.min_prompt_tokens is not None or traffic.max_prompt_tokens is not None
        trace = read_trace(
            traffic.trace,
            traffic.trace_format,
            start_s=traffic.trace_start_s,
            duration_s=traffic.trace_duration_s,
            max_rows=None if filtering else workload.requests,
        )
        all_rows = [scaled(r, traffic) for r in trace.rows]
        left = [r for r in all_rows if kept(r.input_tokens, traffic)]
        rows = time_scale(left[: workload.requests], traffic.time_scale)
        planned, clipped = self._planned(rows, traffic, workload, ctx)
        block = block_tokens(traffic)
        pool = corpus_token_ids(ctx.tokenizer) if ctx.tokenizer is not None else None
        warm = [
            PlannedRequest(
                Request(
                    _prompt(row, i, workload.seed + _WARMUP_SEED, pool, ctx.vocab_size, block)[: len(p.request.prompt)],
                    p.output_tokens,
                    workload.ignore_eos,
                )
            )
            for i, (row, p) in enumerate(zip(rows[: workload.warmup], planned, strict=False))
        ]
        facts = _plan_facts(traffic, trace, rows, all_rows, len(left), clipped)
        return RequestPlan(self.name, warm, planned, facts)

    def _planned(
        self, rows: list[TraceRow], traffic: TraceTraffic, workload: Workload, ctx: PlanContext
    ) -> tuple[list[PlannedRequest], int]:
        pool = corpus_token_ids(ctx.tokenizer) if ctx.tokenizer is not None else None
        block = block_tokens(traffic)
        planned, clipped = [], 0
        for i, row in enumerate(rows):
            out = row.output_tokens if traffic.source_output_lengths else workload.output_tokens
            ids = _prompt(row, i, workload.seed, pool, ctx.vocab_size, block)
            ids, out, cut = refuse_or_fit(ids, out, ctx.context_length, workload.strict_lengths, row.where)
            clipped += cut
            planned.append(PlannedRequest(Request(ids, out, workload.ignore_eos), due_s=row.at_s))
        return planned, clipped


def _plan_facts(
    traffic: TraceTraffic, trace: Trace, rows: list[TraceRow], all_rows: list[TraceRow], left: int, clipped: int
) -> JSONObject:
    facts: JSONObject = {
        "trace": traffic.trace,
        "format": traffic.trace_format,
        "rows": len(rows),
        "duration_s": round(float(rows[-1].at_s), 3) if rows else 0.0,
        **({"skipped": trace.skipped} if trace.skipped else {}),
        **({"clipped": clipped} if clipped else {}),
        "shared_blocks": _shared_blocks(rows),
    }
    if len(all_rows) > left:
        facts["filtered"] = len(all_rows) - left
    if traffic.input_scale != 1 or traffic.output_scale != 1 or len(all_rows) > left:
        facts["as_recorded"] = {  # before scaling and filters: what the preview shows beside the replay
            "rows": len(trace.rows),
            "prompt_median": int(np.median([r.input_tokens for r in trace.rows])),
            "output_median": int(np.median([r.output_tokens for r in trace.rows])),
        }
    window = trace.window_rows - (len(all_rows) - left)
    if len(rows) < window:
        seconds = trace.window_span_s / traffic.time_scale
        facts["capped"] = (
            f"{len(rows):,} of the window's {window:,} rows replayed (requests={len(rows):,}): "
            f"{facts['duration_s']:,.1f} s of its {seconds:,.1f} s"
        )
    return facts


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
