"""Time the Explore page's server-side work on a database of 10,000 runs.

Fills (once) a SQLite database with 10,000 runs through storage.runs.save_run: varied
models, dtypes, batch sizes, sweeps and accuracy, metrics without raw stamps (Explore
never reads them). Then times, cold (no Streamlit cache): the query and DataFrame
(storage.frames.runs_frame), the Pareto front, the plotly figure, and its JSON (what
st.plotly_chart sends). Goal: under one second in total.

    .venv/bin/python benchmarks/explore_10k.py [--db sqlite:///data/bench/explore_10k.db] [--runs 10000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.report.figures import explore_scatter, front_run_ids  # noqa: E402
from engine.spec import parse_job_spec  # noqa: E402
from storage import open_database  # noqa: E402
from storage.frames import runs_frame  # noqa: E402
from storage.runs import NewRun, count_runs, save_run  # noqa: E402

MODELS = ("demo", "synthetic:smollm2-135m", "synthetic:llama-3.2-1b")
DTYPES = ("float32", "bfloat16", "auto")
ATTN = ("auto", "eager", "sdpa")


def stats(rng: random.Random, centre: float) -> dict[str, float]:
    p50 = centre * rng.uniform(0.8, 1.2)
    return {"mean": p50 * 1.05, "p50": p50, "p90": p50 * 1.3, "p95": p50 * 1.4, "p99": p50 * 1.8}


def fill(db, n: int) -> None:
    have = count_runs(db)
    specs = {}
    for i in range(have, n):
        rng = random.Random(i)  # run i gets the same values however the filling was interrupted
        model, dtype, attn = rng.choice(MODELS), rng.choice(DTYPES), rng.choice(ATTN)
        batch = rng.choice((1, 2, 4, 8, 16))
        key = (model, dtype, attn, batch)
        if key not in specs:
            spec = parse_job_spec(
                {
                    "model": {"source": model},
                    "recipe": {"engine": "transformers", "dtype": dtype, "attn_implementation": attn},
                    "workload": {"batch_size": batch},
                }
            )
            specs[key] = (spec.model_dump(mode="json"), spec.fingerprint())
        spec, fp = specs[key]
        tpot = 20 / (1 + 0.1 * batch) * (0.6 if dtype == "bfloat16" else 1.0)
        metrics = {
            g: stats(rng, c)
            for g, c in (
                ("ttft_ms", 300 * batch**0.5),
                ("tpot_ms", tpot),
                ("itl_ms", tpot),
                ("e2el_ms", 300 + 32 * tpot),
            )
        }
        metrics.update(
            output_tokens_per_s=batch * 1000 / metrics["tpot_ms"]["p50"],
            requests_per_s=rng.uniform(0.1, 5),
            tokens_per_s_per_user=1000 / metrics["tpot_ms"]["p50"],
            goodput_requests_per_s=rng.uniform(0, 5),
            peak_memory_bytes=rng.randint(2**28, 2**33),
            load_s=rng.uniform(0.5, 20),
            completed=8,
            failed=0,
        )
        quality = (
            None
            if model.startswith("synthetic")
            else {
                "perplexity": 18.76 * (1 + (0.01 if dtype != "float32" else 0) + rng.uniform(0, 0.02)),
                "kl_mean": rng.uniform(0, 0.05),
                "top1_agreement": rng.uniform(0.9, 1.0),
            }
        )
        save_run(
            db,
            NewRun(
                status="done",
                spec=spec,
                fingerprint=fp,
                model=model,
                engine="transformers",
                device="cpu",
                device_name="bench CPU",
                sweep=f"sweep-{i % 20}" if i % 5 == 0 else None,
                metrics=metrics,
                quality=quality,
            ),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=f"sqlite:///{ROOT / 'data' / 'bench' / 'explore_10k.db'}")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.db.startswith("sqlite:///"):
        Path(args.db.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    db = open_database(args.db)
    t = time.perf_counter()
    fill(db, args.runs)
    print(f"database: {args.db} with {count_runs(db)} runs (filled in {time.perf_counter() - t:.1f} s)")

    x, y, color, symbol = "tpot_ms_p50", "quality.perplexity", "recipe.dtype", "model"
    rows = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        frame = runs_frame(db)
        t1 = time.perf_counter()
        front = front_run_ids(frame, x, y)
        t2 = time.perf_counter()
        fig = explore_scatter(frame, x, y, color, symbol)
        t3 = time.perf_counter()
        fig.to_json()
        t4 = time.perf_counter()
        rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0))
    names = ("query + frame", "Pareto front", "figure", "figure JSON", "total")
    med = [statistics.median(r[i] for r in rows) for i in range(5)]
    print(
        f"{len(frame)} runs, {len(front)} on the front; medians of {args.repeat} cold runs "
        f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs):"
    )
    for name, value in zip(names, med, strict=True):
        print(f"  {name:<14} {value * 1000:8.1f} ms")
    print(f"goal < 1000 ms: {'met' if med[-1] < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
