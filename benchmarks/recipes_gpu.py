"""The CUDA recipes on an H200 (or any GPU): TTFT, TPOT and tokens/s beside the bandwidth floor.

Each recipe runs the synthetic Llama-3.2-1B architecture (random weights) in bfloat16,
batch 1, a 512-token prompt and 128 new tokens, through the real runner: load, one
warm-up request with exactly the measured shapes (so torch.compile and CUDA-graph
capture happen there, never in the measurement; its time is printed as warmup_s),
then ``--requests`` measured requests. Printed per recipe: median TTFT, median TPOT,
output tokens/s, TPOT / floor, warm-up and peak memory, where

    floor = weight bytes (bf16 parameters) / measured device copy bandwidth

is the time to read the weights once per decoded token. Rows are also appended, one
JSON object per line, to ``--out`` (default $OUT/recipes_gpu.jsonl when $OUT is set),
as each recipe finishes, so a run cut short keeps what it measured. Recipes a machine
cannot run (missing package, compute capability) are listed with the reason.

On the lent H200 (no registry there), first `bash scripts/gpu_wheels.sh` here, then one
device call carrying `.whl` (the exact command is in that script's header).

    python benchmarks/recipes_gpu.py                      # every recipe, ~8-12 min on an H200
    python benchmarks/recipes_gpu.py --only compile,int4  # a subset (substring match)
    python benchmarks/recipes_gpu.py --model synthetic:smollm2-135m --device cpu \\
        --prompt-tokens 16 --new-tokens 4 --only "eager,static"   # CPU dry run of the script
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
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LATENCYLAB_CACHE_PATH", str(REPO / "data" / "cache"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(REPO / "data" / "cache" / "inductor"))

SC = {"cache_implementation": "static", "compile": True}
# Ordered so the headline recipes come first: a run cut short still answers the target.
RECIPES: list[tuple[str, dict]] = [
    ("static+compile (default)", {**SC}),
    ("static+compile reduce-overhead", {**SC, "compile_mode": "reduce-overhead"}),
    ("eager dynamic cache", {"attn_implementation": "eager"}),
    ("sdpa dynamic cache", {}),
    ("static cache, no compile", {"cache_implementation": "static"}),
    ("torchao int8 wo + compile", {**SC, "quantization": "torchao_int8_weight_only"}),
    ("torchao int4 wo + compile", {**SC, "quantization": "torchao_int4_weight_only"}),
    ("torchao float8 + compile", {**SC, "quantization": "torchao_float8"}),
    ("torchao int8 dyn + compile", {**SC, "quantization": "torchao_int8_dynamic"}),
    ("drop 4 layers + compile", {**SC, "drop_layers": 4}),
    ("bnb nf4", {"quantization": "bnb_nf4"}),
    ("bnb int8", {"quantization": "bnb_int8"}),
    ("kv quanto int4", {"kv_cache_quantization": "quanto_int4"}),
    ("prompt lookup n=3 k=10", {"speculative": "prompt_lookup"}),
    ("early exit @8", {"speculative": "early_exit", "early_exit_layer": 8, "num_speculative_tokens": 4}),
    ("continuous batching", {"batching": "continuous"}),
    ("flash_attention_2", {"attn_implementation": "flash_attention_2"}),
]


def copy_bandwidth(device: str, gib: float = 1.0, repeats: int = 20) -> float:
    """Device copy bandwidth in bytes/s (bytes read + bytes written per copy)."""
    import torch

    n = int(gib * 2**30) // 2
    src = torch.empty(n, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    if device == "cpu":
        t0 = time.perf_counter()
        for _ in range(repeats):
            dst.copy_(src)
        return 2 * src.numel() * 2 * repeats / (time.perf_counter() - t0)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000
    return 2 * src.numel() * 2 * repeats / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="synthetic:llama-3.2-1b")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--only", help="comma-separated substrings of recipe names")
    parser.add_argument("--budget-s", type=float, default=540.0, help="skip the remaining recipes after this")
    parser.add_argument(
        "--out", default=os.path.join(os.environ["OUT"], "recipes_gpu.jsonl") if os.environ.get("OUT") else None
    )
    args = parser.parse_args()

    import torch

    from engine.run.runner import ProgressState, execute, preflight
    from engine.spec import SpecError, parse_job_spec
    from engine.spec.catalog import parameter_count

    recipes = RECIPES
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        recipes = [(n, r) for n, r in RECIPES if any(k in n for k in keys)]
    arch = args.model.split(":", 1)[1] if args.model.startswith("synthetic:") else None
    params = parameter_count(arch) if arch else None
    bw = copy_bandwidth("cpu" if args.device == "cpu" else args.device)
    weight_bytes = params * 2 if params else None
    floor_ms = weight_bytes / bw * 1000 if weight_bytes else None
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    print(
        f"{name}; torch {torch.__version__}; {args.model} {args.dtype}, batch 1, prompt {args.prompt_tokens}, "
        f"{args.new_tokens} new tokens, {args.requests} measured requests per recipe",
        flush=True,
    )
    if floor_ms:
        print(
            f"copy bandwidth {bw / 1e12:.2f} TB/s; weights {weight_bytes / 1e9:.2f} GB (bf16); "
            f"floor {floor_ms:.3f} ms/token",
            flush=True,
        )
    out = open(args.out, "a", encoding="utf-8") if args.out else None
    header = (
        f"{'recipe':<32}{'TTFT ms':>9}{'TPOT ms':>9}{'tok/s':>8}{'x floor':>9}{'warmup s':>10}"
        f"{'peak GB':>9}{'accept':>8}"
    )
    rows: list[str] = []
    tpots: list[float] = []
    t_start = time.time()
    for label, recipe in recipes:
        if time.time() - t_start > args.budget_s:
            rows.append(f"{label:<32}  skipped: time budget ({args.budget_s:.0f} s) spent")
            continue
        record: dict = {"recipe": label, "spec": recipe}
        try:
            spec = parse_job_spec(
                {
                    "model": {"source": args.model},
                    "recipe": {"engine": "transformers", "dtype": args.dtype, **recipe},
                    "device": args.device,
                    "workload": {
                        "prompt_tokens": args.prompt_tokens,
                        "output_tokens": args.new_tokens,
                        "requests": args.requests,
                        "batch_size": 1,
                        "warmup_requests": 1,
                    },
                }
            )
            preflight(spec)
            t0 = time.time()
            result = execute(spec, ProgressState(), log=lambda _m: None)
            m = result.metrics
            tpot = m["tpot_ms"]["p50"]
            record.update(
                ttft_ms=m["ttft_ms"]["p50"],
                tpot_ms=tpot,
                tokens_per_s=1000.0 / tpot if tpot else None,
                x_floor=tpot / floor_ms if floor_ms and tpot else None,
                warmup_s=m["warmup_s"],
                peak_gb=(m.get("peak_memory_bytes") or 0) / 1e9,
                wall_s=time.time() - t0,
                acceptance=(result.provenance.get("speculation") or {}).get("acceptance_rate"),
                applied=result.provenance.get("applied"),
            )
            acc = record["acceptance"]
            if tpot:
                tpots.append(tpot)
            rows.append(
                f"{label:<32}{record['ttft_ms']:>9.2f}{tpot:>9.3f}{record['tokens_per_s']:>8.1f}"
                f"{(record['x_floor'] or float('nan')):>9.2f}{record['warmup_s']:>10.1f}"
                f"{record['peak_gb']:>9.2f}{'-' if acc is None else f'{acc:.0%}':>8}"
            )
        except SpecError as exc:
            record["unavailable"] = str(exc)
            rows.append(f"{label:<32}  unavailable: {exc}")
        except Exception as exc:  # noqa: BLE001 - a failing recipe is reported, and the next one runs
            record["error"] = (
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:160] if str(exc).strip() else ''}"
            )
            rows.append(f"{label:<32}  failed: {record['error']}")
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        print(rows[-1], flush=True)
        if out:
            out.write(json.dumps(record, default=str) + "\n")
            out.flush()
    print("\n" + header)
    print("\n".join(rows))
    if tpots and floor_ms:
        best = min(tpots)
        print(
            f"\nfastest TPOT {best:.3f} ms = {best / floor_ms:.2f}x the {floor_ms:.3f} ms floor "
            f"(target: within 2x); median of recipes {statistics.median(tpots):.3f} ms"
        )


if __name__ == "__main__":
    main()
