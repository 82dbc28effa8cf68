"""Each CPU-runnable transformers recipe on the demo model, relative to the float32 baseline.

Runs every recipe through the real runner (load -> warm-up -> measure; warm-up and any
compilation excluded from the numbers), interleaving the recipes over ``--rounds``
rounds so that a neighbour's load spreads over all of them, and prints per recipe the
median TTFT and TPOT, their ratio to the float32 baseline (> 1 means slower), the
speculation acceptance rate where there is one, the warm-up time, the load average
and the CPU/wall ratio of the measured phase. A knob that is slower here shows up as
slower: nothing is filtered.

    .venv/bin/python benchmarks/recipes_cpu.py [--prompt-tokens 128 --output-tokens 32 --requests 3
                                                --rounds 2 --compile --only baseline,int8-wo]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LATENCYLAB_CACHE_PATH", str(REPO / "data" / "cache"))

RECIPES: dict[str, dict] = {
    "baseline fp32": {},
    "bf16": {"dtype": "bfloat16"},
    "eager attn": {"attn_implementation": "eager"},
    "torchao int8 wo": {"quantization": "torchao_int8_weight_only"},
    "torchao int8 dyn": {"quantization": "torchao_int8_dynamic"},
    "torch dyn int8": {"quantization": "torch_dynamic_int8"},
    "static cache": {"cache_implementation": "static"},
    "kv quanto int4": {"kv_cache_quantization": "quanto_int4"},
    "prompt lookup": {"speculative": "prompt_lookup", "prompt_lookup_ngram": 3, "num_speculative_tokens": 5},
    "early exit @20": {"speculative": "early_exit", "early_exit_layer": 20, "num_speculative_tokens": 3},
    "drop 6 layers": {"drop_layers": 6},
    "continuous": {"batching": "continuous"},
    "1 CPU thread": {"cpu_threads": 1},
    # built once on the default corpus (minutes the first time; cached by fingerprint after)
    "gptq int4 g64": {"quantization": "gptq", "gptq_bits": 4, "gptq_group_size": 64},
    "gptq int4 g64 1 thr": {"quantization": "gptq", "gptq_bits": 4, "gptq_group_size": 64, "cpu_threads": 1},
    # 3 processes share the 2 cores over gloo: checks the sharded path; not expected to be faster
    "tensor parallel x3": {"tensor_parallel": True, "tensor_parallel_ranks": 3},
}
COMPILE = {"static+compile": {"cache_implementation": "static", "compile": True}}


def run_one(recipe: dict, args: argparse.Namespace) -> dict:
    from engine.run.runner import ProgressState, execute, preflight
    from engine.spec import parse_job_spec

    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "transformers", **recipe},
            "workload": {
                "prompt_tokens": args.prompt_tokens,
                "output_tokens": args.output_tokens,
                "requests": args.requests,
                "batch_size": 1,
            },
        }
    )
    preflight(spec)
    result = execute(spec, ProgressState(), log=lambda _m: None)
    m, prov = result.metrics, result.provenance
    return {
        "ttft_ms": m["ttft_ms"]["p50"],
        "tpot_ms": m["tpot_ms"]["p50"],
        "warmup_s": m["warmup_s"],
        "acceptance": (prov.get("speculation") or {}).get("acceptance_rate"),
        "load_avg": prov.get("load_avg_after", [None])[0],
        "cpu_wall": prov.get("cpu_wall_ratio"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="include static cache + torch.compile (~1 min cold)")
    parser.add_argument("--only", help="comma-separated recipe names (the baseline is always run)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args()

    recipes = dict(RECIPES, **(COMPILE if args.compile else {}))
    if args.only:
        wanted = {"baseline fp32", *[w.strip() for w in args.only.split(",")]}
        recipes = {k: v for k, v in recipes.items() if k in wanted}
    runs: dict[str, list[dict]] = {name: [] for name in recipes}
    t0 = time.time()
    names = list(recipes)
    for rnd in range(args.rounds):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]  # rotate: no recipe always runs first
        for name in order:
            recipe = recipes[name]
            try:
                runs[name].append(run_one(recipe, args))
            except Exception as exc:  # noqa: BLE001 - a failing recipe is reported, not hidden
                runs[name].append({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"})
            print(f"round {rnd + 1}/{args.rounds} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)

    def med(rows: list[dict], key: str) -> float | None:
        vals = [r[key] for r in rows if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    base_ttft, base_tpot = med(runs["baseline fp32"], "ttft_ms"), med(runs["baseline fp32"], "tpot_ms")
    print(
        f"\ndemo model (SmolLM2-135M), CPU, batch 1, prompt {args.prompt_tokens}, {args.output_tokens} new tokens, "
        f"{args.requests} requests x {args.rounds} rounds, medians; {time.time() - t0:.0f} s total"
    )
    print(
        f"{'recipe':<18}{'TTFT ms':>9}{'x base':>8}{'TPOT ms':>9}{'x base':>8}{'accept':>8}{'warmup s':>10}"
        f"{'load1':>7}{'cpu/wall':>9}"
    )
    rows = []
    for name, rr in runs.items():
        errors = [r["error"] for r in rr if "error" in r]
        if errors and len(errors) == len(rr):
            print(f"{name:<18}  failed: {errors[0]}")
            rows.append({"recipe": name, "error": errors[0]})
            continue
        ttft, tpot = med(rr, "ttft_ms"), med(rr, "tpot_ms")
        acc = med(rr, "acceptance")
        row = {
            "recipe": name,
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "ttft_x": ttft / base_ttft,
            "tpot_x": tpot / base_tpot,
            "acceptance": acc,
            "warmup_s": med(rr, "warmup_s"),
            "load1": med(rr, "load_avg"),
            "cpu_wall": med(rr, "cpu_wall"),
        }
        rows.append(row)
        print(
            f"{name:<18}{ttft:>9.1f}{row['ttft_x']:>8.2f}{tpot:>9.1f}{row['tpot_x']:>8.2f}"
            f"{'-' if acc is None else f'{acc:.0%}':>8}{row['warmup_s']:>10.1f}{row['load1']:>7.1f}"
            f"{row['cpu_wall']:>9.2f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
