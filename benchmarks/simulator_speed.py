"""How fast the serving simulator (``engine/whatif/serving``) predicts a long run, on one core.

The target (issue 32): one hour of traffic at 20 requests/s (72,000 requests of about 1,000 prompt
and 200 output tokens, Poisson arrivals) simulated on an H100-class entry in 30 s or less, 120x
faster than real time. Prompts are drawn seeded (lengths uniform within +-20% of the means), each
its own unless ``--prefixes K --prefix-tokens N`` give them one of K shared system prompts. The
table says what each part took: building the requests (hashing the prompts' blocks), the
simulation itself, and with ``--records`` the records the metric code reads.

    .venv/bin/python benchmarks/simulator_speed.py [--requests 72000] [--rate 20] [--prompt-tokens 1000]
        [--output-tokens 200] [--prefixes 0 --prefix-tokens 0] [--hardware h100-sxm]
        [--model synthetic:llama-3-8b] [--no-fast-forward] [--records] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.whatif.hardware import CATALOG, get_hardware
from engine.whatif.serving import (
    Arrivals,
    Precisions,
    Served,
    ServerConfig,
    SimRequest,
    StepCosts,
    sim_request,
    simulate,
    to_records,
)
from engine.whatif.shapes import EstimateError, model_shape

TARGET_S = 30.0


def build(args: argparse.Namespace, block_size: int) -> list[SimRequest]:
    """The workload: seeded lengths and token ids, shared prefixes where asked."""
    rng = np.random.default_rng(args.seed)
    prefixes = [rng.integers(0, 32_000, args.prefix_tokens) for _ in range(args.prefixes)]
    prompts = rng.integers(int(args.prompt_tokens * 0.8), int(args.prompt_tokens * 1.2) + 1, args.requests)
    outputs = rng.integers(max(1, int(args.output_tokens * 0.8)), int(args.output_tokens * 1.2) + 1, args.requests)
    out = []
    for i in range(args.requests):
        own = rng.integers(0, 32_000, max(1, int(prompts[i]) - (args.prefix_tokens if prefixes else 0)))
        ids = np.concatenate((prefixes[i % len(prefixes)], own)) if prefixes else own
        out.append(sim_request(i, ids, int(outputs[i]), block_size))
    return out


def timed(rows: list[tuple[str, float, str]], name: str, fn, note=lambda _: ""):
    t0 = time.perf_counter()
    value = fn()
    rows.append((name, time.perf_counter() - t0, note(value)))
    return value


def main(args: argparse.Namespace) -> int:
    hw = get_hardware(args.hardware)
    served = Served(hw, model_shape(args.model), Precisions.resolve(hw))
    config = ServerConfig()
    rows: list[tuple[str, float, str]] = []
    reqs = timed(rows, "build requests (hash prompt blocks)", lambda: build(args, config.block_size))
    arrivals = Arrivals("poisson", rate=args.rate, seed=args.seed)
    result = timed(
        rows,
        "simulate",
        lambda: simulate(reqs, config, served, StepCosts(), arrivals, fast_forward=not args.no_fast_forward),
    )
    if args.records:
        timed(
            rows, "to_records", lambda: to_records(result), lambda r: f"{sum(len(x.chunk_ns) for x in r[0]):,} chunks"
        )
    s = result.stats
    sim_s = rows[1][1]
    print(f"{args.requests:,} requests at {args.rate:g}/s on {hw.name}, {served.shape.name}: "
          f"{s.duration_s:,.0f} s simulated in {sim_s:.1f} s ({s.duration_s / sim_s:,.0f}x real time; target "
          f"<= {TARGET_S:.0f} s for an hour at 20/s)")  # fmt: skip
    print(f"{'part':<38}{'seconds':>10}  note")
    for name, secs, note in rows:
        print(f"{name:<38}{secs:>10.2f}  {note}")
    ttft = np.array([result.first_token_s(o) - o.send_s for o in result.requests if o.runs])
    print(
        f"steps {s.steps:,} (fast-forwarded {s.fast_forwarded_steps:,}); mean batch {s.mean_batch:.1f}; tokens/step "
        f"mean {s.tokens_per_step_mean:.0f} p99 {s.tokens_per_step_p99:.0f}; preemptions {s.preemptions:,}; "
        f"prefix hit rate {s.prefix_hit_rate or 0:.1%}; peak KV {s.peak_kv_blocks:,}/{s.num_blocks:,} blocks; "
        f"TTFT p50 {np.percentile(ttft, 50) * 1e3:.1f} ms p99 {np.percentile(ttft, 99) * 1e3:.1f} ms"
    )
    return 0


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
        return value

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=Path(__file__).name, description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=_positive(int), default=72_000)
    ap.add_argument("--rate", type=_positive(float), default=20.0, help="requests per second (Poisson)")
    ap.add_argument("--prompt-tokens", type=_positive(int), default=1000)
    ap.add_argument("--output-tokens", type=_positive(int), default=200)
    ap.add_argument("--prefixes", type=int, default=0, help="shared system prompts (0: every prompt its own)")
    ap.add_argument("--prefix-tokens", type=int, default=0)
    ap.add_argument("--hardware", default="h100-sxm", help=f"one of: {', '.join(CATALOG)}")
    ap.add_argument("--model", default="synthetic:llama-3-8b")
    ap.add_argument("--no-fast-forward", action="store_true", help="step one by one (same times, slower)")
    ap.add_argument("--records", action="store_true", help="also time the records the metric code reads")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.seed < 0:
        ap.error(f"--seed {args.seed} must be 0 or more")
    if args.hardware not in CATALOG:
        ap.error(f"--hardware {args.hardware!r} is not in the catalog: {', '.join(CATALOG)}")
    if args.prefixes < 0 or args.prefix_tokens < 0 or (args.prefixes > 0) != (args.prefix_tokens > 0):
        ap.error("--prefixes and --prefix-tokens go together, both 1 or more (or both 0)")
    if args.prefix_tokens >= args.prompt_tokens * 0.8:
        ap.error("--prefix-tokens must be below the shortest prompt (80% of --prompt-tokens)")
    try:
        model_shape(args.model)
    except EstimateError as exc:
        ap.error(f"--model: {exc}")
    return args


if __name__ == "__main__":
    sys.exit(main(parse_args()))
