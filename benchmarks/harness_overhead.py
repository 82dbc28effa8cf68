"""The harness's own cost per chunk: the measuring loop against a stream that yields
instantly (no model), so everything timed is LatencyLab's bookkeeping.

    .venv/bin/python benchmarks/harness_overhead.py [--chunks 200000]
Target: <= 20 us per chunk.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncio

from engine.backends.base import stamp_chunks
from engine.measure.metrics import compute_metrics
from engine.measure.records import RunRecord
from engine.run.driver import drive_phase
from engine.run.plan import planned
from engine.run.runner import ProgressState
from engine.spec import parse_job_spec


class InstantBackend:
    """Test double (never registered): every step's chunks of a batch arrive at once."""

    name = "instant"

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    async def stream(self, batch, records) -> None:
        send = time.perf_counter_ns()
        chunk = stamp_chunks(records)
        rows = range(len(batch))
        for _ in range(batch[0].max_new_tokens):
            t = time.perf_counter_ns()
            for row in rows:
                chunk(row, t, 1)
        for rec in records:
            rec.send_ns = send


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output-tokens", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {
                "prompt_tokens": 4,
                "output_tokens": a.output_tokens,
                "requests": a.requests,
                "batch_size": a.batch_size,
            },
        }
    )
    prompts = planned([[1, 2, 3, 4]] * a.requests, a.output_tokens)
    chunks = a.requests * a.output_tokens
    per_chunk, metric_s = [], []
    for _ in range(a.repeats):
        state = ProgressState()
        t0 = time.perf_counter_ns()
        phase = drive_phase(InstantBackend(), prompts, spec.workload, state)
        per_chunk.append((time.perf_counter_ns() - t0) / chunks / 1000)
        t1 = time.perf_counter()
        compute_metrics(RunRecord(start_ns=phase.start_ns, end_ns=phase.end_ns, requests=phase.records))
        metric_s.append(time.perf_counter() - t1)
    print(f"chunks per repeat: {chunks:,} ({a.requests} requests x {a.output_tokens} tokens, batch {a.batch_size})")
    print(
        f"measuring loop incl. the instant stream: median {statistics.median(per_chunk):.3f} us/chunk "
        f"(min {min(per_chunk):.3f}, max {max(per_chunk):.3f}); target <= 20 us"
    )
    print(f"compute_metrics over the whole run (after measuring): median {statistics.median(metric_s) * 1000:.1f} ms")
    streamer_cost(a.batch_size)


def streamer_cost(batch: int, steps: int = 20000) -> None:
    """The transformers backend's streamer: what each decoding step costs it on the host."""
    import torch

    from engine.backends.transformers.streaming import StampingStreamer

    tokens = torch.arange(batch)
    streamer = StampingStreamer(lambda row, t_ns, n_tokens: None, batch, None)
    streamer.put(torch.zeros((batch, 4), dtype=torch.long))  # the prompt
    t0 = time.perf_counter_ns()
    for _ in range(steps):
        streamer.put(tokens)
    per_step = (time.perf_counter_ns() - t0) / steps / 1000
    print(f"transformers streamer.put: {per_step:.2f} us per step = {per_step / batch:.3f} us/chunk at batch {batch}")


if __name__ == "__main__":
    main()
