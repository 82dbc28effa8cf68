"""Figures for background jobs.

1. Time from a job's start (its process spawned by the worker) to its first progress
   update in the database, i.e. what the Jobs page can show. Model loading is excluded
   by construction: the first update is written before anything heavy is imported.
   Target <= 2 s.
2. Claim throughput on SQLite with 4 worker processes claiming queued jobs at once.
   Target >= 50 claims/s.

Usage: .venv/bin/python benchmarks/jobs_bench.py [--repeats 5] [--jobs 400] [--json]
Timings depend on the machine's load; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.spec import parse_job_spec

SPEC = parse_job_spec(
    {"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2}}
)


def first_progress_s(db_url: str, repeats: int) -> list[float]:
    """Spawn each job exactly as the worker does and time its first progress write."""
    from engine.jobs.local_placement import LocalPlacement
    from engine.jobs.worker import Worker
    from storage import jobs, open_database

    db = open_database(db_url)
    worker = Worker(db_url, ["cpu"], worker_id="bench")  # for its WorkerInfo (id, host, log folder)
    worker.log_dir.mkdir(parents=True, exist_ok=True)
    placement = LocalPlacement(["cpu"])
    out = []
    for _ in range(repeats):
        jobs.submit(db, SPEC, timeout_s=600)
        job = jobs.claim(db, "bench", ["cpu"])
        t0 = time.monotonic()
        running = placement.start(job, worker.info)
        jobs.mark_started(db, job.id, "bench")
        while True:
            current = jobs.get_job(db, job.id)
            if current.progress_note is not None:  # written by the job process itself
                out.append(time.monotonic() - t0)
                break
            if time.monotonic() - t0 > 30:
                out.append(float("nan"))
                break
            time.sleep(0.005)
        placement.force(running)
        placement.collect(timeout_s=10.0)
        jobs.finish(db, job.id, "bench", "cancelled", error="benchmark")
    return out


def _claimer(db_url: str, name: str, start: mp.Event, out: mp.Queue) -> None:
    from storage import jobs, open_database

    db = open_database(db_url)
    start.wait()
    n = 0
    while jobs.claim(db, name, ["cpu"]) is not None:
        n += 1
    out.put((n, time.time()))


def claim_throughput(db_url: str, n_jobs: int, workers: int = 4) -> dict:
    from storage import jobs, open_database

    db = open_database(db_url)
    jobs.submit_many(db, [SPEC] * n_jobs)
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(db_url, f"w{i}", start, out)) for i in range(workers)]
    for p in procs:
        p.start()
    time.sleep(3.0)  # let every process import and open the database
    t0 = time.time()
    start.set()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    elapsed = max(t for _, t in results) - t0
    claimed = sum(n for n, _ in results)
    return {
        "jobs": n_jobs,
        "workers": workers,
        "claimed": claimed,
        "per_worker": [n for n, _ in results],
        "elapsed_s": elapsed,
        "claims_per_s": claimed / elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jobs-bench-"))
    os.environ["LATENCYLAB_DATA_DIR"] = str(tmp)
    load_before = os.getloadavg()
    firsts = first_progress_s(f"sqlite:///{tmp / 'progress.db'}", args.repeats)
    claims = claim_throughput(f"sqlite:///{tmp / 'claims.db'}", args.jobs)
    result = {
        "first_progress_s": {
            "values": [round(v, 3) for v in firsts],
            "max": max(firsts),
            "median": sorted(firsts)[len(firsts) // 2],
            "target_s": 2.0,
        },
        "claims": {**claims, "target_per_s": 50.0},
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        f = result["first_progress_s"]
        print(
            f"first progress update after job start: median {f['median']:.2f} s, max {f['max']:.2f} s "
            f"over {len(firsts)} jobs (target <= 2 s): {f['values']}"
        )
        print(
            f"claims with {claims['workers']} processes on SQLite: {claims['claims_per_s']:.0f} claims/s "
            f"({claims['claimed']} of {claims['jobs']} jobs in {claims['elapsed_s']:.2f} s, "
            f"per worker {claims['per_worker']}; target >= 50/s)"
        )
        print(
            f"load average before {load_before[0]:.2f}, after {result['load_avg_after'][0]:.2f} "
            f"on {os.cpu_count()} CPUs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
