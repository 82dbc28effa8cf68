"""Time the server-side work of Runs, Explore and History on a database of 100,000 (or 10,000) runs.

Fills (once) a SQLite database with synthetic runs, bulk-inserted in batches: varied models,
dtypes, batch sizes, sweeps and accuracy, metrics without raw stamps (no page reads them);
each row's headline columns come from storage.columns.column_values, exactly as a saved run's.
Then times, cold (no Streamlit cache), through the real facades the pages call:

* Runs: one sorted, filtered page (storage.frames.runs_page), the filter choices and the
  table in words (engine.report.runs_table);
* Explore: the frame of every finished run (storage.frames.query_frame), the axis lists and
  default colour, the Pareto front, the plotly figure and its JSON (what st.plotly_chart sends);
* History: the fingerprint list, one fingerprint's runs, the series with its change points and
  its figure's JSON.

Goal: each page under one second.

    .venv/bin/python benchmarks/explore_10k.py [--runs 100000 | --runs 10000] [--db sqlite:///...]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert  # noqa: E402

from engine.report.figures import explore_scatter, front_run_ids  # noqa: E402
from engine.report.history import build_history, fingerprint_runs, history_figure, metric_choices  # noqa: E402
from engine.report.listing import EXPLORE_POINTS, axis_choices, default_colour, runs_table  # noqa: E402
from engine.spec import parse_job_spec  # noqa: E402
from storage import open_database  # noqa: E402
from storage.columns import column_values  # noqa: E402
from storage.frames import RunQuery, count, distinct_values, query_frame, runs_page  # noqa: E402
from storage.jsontext import dumps  # noqa: E402
from storage.models import RunRow  # noqa: E402
from storage.runs import count_runs  # noqa: E402
from storage.suites import fingerprints  # noqa: E402

MODELS = ("demo", "synthetic:smollm2-135m", "synthetic:llama-3.2-1b")
DTYPES = ("float32", "bfloat16", "auto")
ATTN = ("auto", "eager", "sdpa")
BATCH = 5000


def stats(rng: random.Random, centre: float) -> dict[str, float]:
    p50 = centre * rng.uniform(0.8, 1.2)
    return {"mean": p50 * 1.05, "p50": p50, "p90": p50 * 1.3, "p95": p50 * 1.4, "p99": p50 * 1.8}


def _spec(specs: dict, model: str, dtype: str, attn: str, batch: int) -> tuple[dict, str, str]:
    key = (model, dtype, attn, batch)
    if key not in specs:
        spec = parse_job_spec(
            {
                "model": {"source": model},
                "recipe": {"engine": "transformers", "dtype": dtype, "attn_implementation": attn},
                "workload": {"batch_size": batch},
            }
        )
        data = spec.model_dump(mode="json")
        specs[key] = (data, spec.fingerprint(), dumps(data, sort_keys=True))
    return specs[key]


def synthetic_row(i: int, specs: dict, start: datetime) -> dict:
    """Run ``i``'s row: the same values however the filling was interrupted."""
    rng = random.Random(i)
    model, dtype, attn = rng.choice(MODELS), rng.choice(DTYPES), rng.choice(ATTN)
    batch = rng.choice((1, 2, 4, 8, 16))
    spec, fp, spec_text = _spec(specs, model, dtype, attn, batch)
    tpot = 20 / (1 + 0.1 * batch) * (0.6 if dtype == "bfloat16" else 1.0)
    centres = (("ttft_ms", 300 * batch**0.5), ("tpot_ms", tpot), ("itl_ms", tpot), ("e2el_ms", 300 + 32 * tpot))
    metrics: dict = {g: stats(rng, c) for g, c in centres}
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
    quality = None
    if not model.startswith("synthetic"):
        quality = {
            "perplexity": 18.76 * (1 + (0.01 if dtype != "float32" else 0) + rng.uniform(0, 0.02)),
            "kl_mean": rng.uniform(0, 0.05),
            "top1_agreement": rng.uniform(0.9, 1.0),
        }
    failed = i % 50 == 7
    row = {
        "created_at": start + timedelta(minutes=5 * i),
        "status": "failed" if failed else "done",
        "name": None,
        "sweep": f"sweep-{i % 20}" if i % 5 == 0 else None,
        "fingerprint": fp,
        "spec_json": spec_text,
        "model": model,
        "engine": "transformers",
        "device": "cpu",
        "device_name": "bench CPU",
        "provenance_json": dumps({"host": "bench", "git_commit": f"c{i // 5000}"}),
        "metrics_json": None if failed else dumps(metrics),
        "quality_json": None if failed or quality is None else dumps(quality),
        "error": "out of memory while loading" if failed else None,
    }
    row.update(column_values(spec, None if failed else metrics, None if failed else quality, "transformers"))
    return row


def fill(db, n: int) -> None:
    """Bulk-insert runs until there are ``n`` (a seed, not the measured part)."""
    have, specs = count_runs(db), {}
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for first in range(have, n, BATCH):
        rows = [synthetic_row(i, specs, start) for i in range(first, min(first + BATCH, n))]
        with db.engine.begin() as conn:
            conn.execute(insert(RunRow.__table__), rows)


def time_runs(db) -> dict[str, float]:
    t0 = time.perf_counter()
    query = RunQuery(status=("done",), sort="ttft_ms_p50", descending=False, limit=50, offset=100)
    page, total = runs_page(db, query)
    t1 = time.perf_counter()
    for column in ("model", "engine", "device", "status"):
        distinct_values(db, column)
    runs_page(db, RunQuery(text="bfloat16", model=("demo",), limit=50))
    t2 = time.perf_counter()
    runs_table(page)
    t3 = time.perf_counter()
    assert total > 0 and len(page) == 50
    return {"page (sort, filter)": t1 - t0, "filter choices, search": t2 - t1, "table in words": t3 - t2}


def time_explore(db) -> dict[str, float]:
    x, y, symbol = "tpot_ms_p50", "quality.perplexity", "model"
    t0 = time.perf_counter()
    query = RunQuery(status=("done",), limit=EXPLORE_POINTS)  # as the page: the newest 20,000 matching runs
    frame, matching = query_frame(db, query), count(db, query)
    t1 = time.perf_counter()
    axis_choices(frame)
    color = default_colour(frame)
    front = front_run_ids(frame, x, y)
    t2 = time.perf_counter()
    fig = explore_scatter(frame, x, y, color, symbol)
    t3 = time.perf_counter()
    fig.to_json()
    t4 = time.perf_counter()
    assert front and color and matching >= len(frame)
    return {"query, count + frame": t1 - t0, "axes, colour, front": t2 - t1, "figure": t3 - t2, "figure JSON": t4 - t3}


def time_history(db) -> dict[str, float]:
    t0 = time.perf_counter()
    infos = fingerprints(db)
    t1 = time.perf_counter()
    runs = fingerprint_runs(db, infos[0].fingerprint)
    metric = metric_choices(runs)[0]
    t2 = time.perf_counter()
    h = build_history(infos[0].fingerprint, metric, runs)
    history_figure(h).to_json()
    t3 = time.perf_counter()
    return {"fingerprints": t1 - t0, f"{len(runs)} runs of one": t2 - t1, "series + figure": t3 - t2}


def report(name: str, timer, db, repeat: int) -> float:
    """Run ``timer`` ``repeat`` times; print the medians (wall clock, and this process's CPU time)."""
    rows, cpu = [], []
    for _ in range(repeat):
        c0 = time.process_time()
        rows.append(timer(db))
        cpu.append(time.process_time() - c0)
    parts = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    total = statistics.median(sum(r.values()) for r in rows)
    verdict = "met" if total < 1.0 else "NOT met"
    print(f"{name}: {total * 1000:.0f} ms wall ({verdict}), {statistics.median(cpu) * 1000:.0f} ms CPU")
    for part, value in parts.items():
        print(f"  {part:<24} {value * 1000:8.1f} ms")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="100000 (default) or 10000")
    parser.add_argument("--db", default=None, help="default: data/bench/explore_<runs>.db")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url = args.db or f"sqlite:///{ROOT / 'data' / 'bench' / f'explore_{args.runs // 1000}k.db'}"
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    db = open_database(url)
    t = time.perf_counter()
    fill(db, args.runs)
    print(f"database: {url} with {count_runs(db)} runs (filled in {time.perf_counter() - t:.1f} s)")
    print(f"medians of {args.repeat} cold runs (load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs;")
    print("on a busy machine the CPU time is the closer figure of what one idle core takes)")
    for name, timer in (("Runs", time_runs), ("Explore", time_explore), ("History", time_history)):
        report(name, timer, db, args.repeat)


if __name__ == "__main__":
    main()
