"""How well the what-if estimator predicts runs it has not seen, measured here.

Runs a handful of real, small benchmarks (demo model and synthetic:smollm2-135m at a few
batch sizes and prompt lengths, 16 output tokens) into a temporary database, measures
the local device with the micro-benchmark, fits the calibration leaving each run out,
and prints the median absolute error of the TTFT and TPOT predictions (target <= 15 %).
Then prints the calibrated prediction for Llama-3-8B bf16, batch 1, on an A100 80GB next
to the seed article's claims (TTFT 180 ms, ITL 40 ms; claims, not facts).

    .venv/bin/python benchmarks/estimator_error.py [--quick] [--db sqlite:///path.db]

Timings on a shared CPU are noisy; the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LATENCYLAB_CACHE_PATH", str(REPO / "data" / "cache"))

GRID: list[tuple[str, int, int]] = [  # (model, batch size, prompt tokens)
    ("demo", 1, 64),
    ("demo", 1, 256),
    ("demo", 4, 64),
    ("demo", 4, 256),
    ("synthetic:smollm2-135m", 1, 128),
    ("synthetic:smollm2-135m", 2, 256),
    ("synthetic:smollm2-135m", 8, 64),
    ("synthetic:smollm2-135m", 1, 64),
]
SEED_CLAIM = {"ttft_ms": 180.0, "itl_ms": 40.0}  # seed article: Llama-3 8B on an A100


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="database URL (default: a temporary SQLite file)")
    ap.add_argument("--quick", action="store_true", help="first 5 grid points only")
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--skip-runs", action="store_true", help="reuse the runs already in --db")
    args = ap.parse_args()

    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec
    from engine.whatif.calibrate import calibrate
    from engine.whatif.estimate import EstimateRecipe, EstimateWorkload, model_shape
    from engine.whatif.hardware import CATALOG
    from engine.whatif.microbench import run_microbench, store
    from engine.whatif.query import table_rows, what_if
    from storage import open_database

    url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='estimator_error_')}/runs.db"
    db = open_database(url)
    print(f"database: {url}")
    bench = run_microbench("cpu", copy_mb=128, repeats=7)
    store(db, bench)
    print(
        f"micro-benchmark: copy {bench.copy_gbs:.1f} GB/s, matmul "
        + ", ".join(f"{k} {v * 1e3:.0f} GFLOP/s" for k, v in bench.matmul_tflops.items())
    )
    grid = GRID[:5] if args.quick else GRID
    if not args.skip_runs:
        for model, bs, prompt in grid:
            spec = parse_job_spec(
                {
                    "model": {"source": model},
                    "workload": {
                        "prompt_tokens": prompt,
                        "output_tokens": args.output_tokens,
                        "requests": 2 * bs,
                        "batch_size": bs,
                    },
                }
            )
            t0 = time.perf_counter()
            res = run_benchmark(spec, db=db, log=lambda _m: None)
            m = res.metrics
            print(
                f"  run {res.run_id}: {model} bs={bs} prompt={prompt}: TTFT p50 {m['ttft_ms']['p50']:.1f} ms, "
                f"TPOT p50 {m['tpot_ms']['p50']:.2f} ms ({time.perf_counter() - t0:.1f} s, "
                f"load {os.getloadavg()[0]:.2f})"
            )

    cal = calibrate(db)
    for run_id, reason in cal.skipped:
        print(f"  skipped run {run_id}: {reason}")
    if cal.left_out:
        print(cal.left_out)
    for g in cal.groups:
        print(f"\n{g.label}")
        print("  factors: " + ", ".join(f"{k}={v:.3g}" for k, v in g.factors.to_dict().items()))
        print(f"  {'run':>4} {'TTFT pred':>10} {'meas':>8} {'err':>7}   {'TPOT pred':>10} {'meas':>8} {'err':>7}")
        for h in g.held_out:
            print(
                f"  {h.run_id:>4} {h.ttft_pred_ms:>10.1f} {h.ttft_meas_ms:>8.1f} {h.ttft_err:>+7.1%}   "
                f"{h.tpot_pred_ms:>10.2f} {h.tpot_meas_ms:>8.2f} {h.tpot_err:>+7.1%}"
            )
        if g.band:
            verdict = "meets" if max(g.band.ttft_pct, g.band.tpot_pct) <= 15 else "MISSES"
            print(
                f"  leave-one-out median |error|: TTFT {g.band.ttft_pct:.1f} %, TPOT {g.band.tpot_pct:.1f} % "
                f"(p90 {g.band.ttft_p90_pct:.1f} % / {g.band.tpot_p90_pct:.1f} %); {verdict} the 15 % target"
            )

    shape = model_shape("synthetic:llama-3-8b")
    wl = EstimateWorkload(prompt_tokens=512, output_tokens=128)  # the article gives no lengths; 512/128 assumed
    print(
        "\nLlama-3-8B, bf16, batch 1, 512 prompt + 128 output tokens. Seed article claims (not facts): "
        "A100 80GB TTFT 180 ms / ITL 40 ms; RTX 4090 TTFT 220 ms / ITL 55 ms; H100 ~20 % lower ITL than A100."
    )
    for key in ("a100-80gb", "rtx-4090", "h100-sxm"):
        for engine in ("transformers", "vllm", "ideal"):
            result = what_if(
                shape,
                "synthetic:llama-3-8b",
                [CATALOG[key]],
                EstimateRecipe(engine=engine, dtype="bf16"),
                wl,
                calibration=cal,
            )
            r = table_rows(result)[0]
            print(
                f"  {key:<10} {engine:<13} TTFT {r['ttft_ms']:7.1f} ms  TPOT {r['tpot_ms']:6.2f} ms  "
                f"[{r['bound']}]  {r['calibration']}"
            )
    print(f"\nload average now: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
