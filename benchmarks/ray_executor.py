"""Figures for the Ray executor against the local worker, on this machine.

1. Jobs per minute for N tiny jobs (default 20) through each: the span from the worker's start to
   its exit with ``--once`` (connecting to Ray included), and the span from the first claim to the
   last job's end (the database's timestamps: the queue's own pace).
2. Submit -> first measured request: from queueing one job (worker already running and idle) to
   the first request the server receives (warm-up 0, so it is measured), on Ray and locally.
3. The same run: one demo-model spec (the transformers engine in the job's process, 16 requests
   of 32 output tokens) through each; its fingerprint, TTFT and TPOT p50 with their 95 % intervals,
   and whether the intervals overlap.

The jobs are the real ``openai`` engine (a benchmark client) with the demo model's tokenizer against
the tests' fake OpenAI server, 1 request of 8 prompt and 4 output tokens: each job's own work is tiny,
so the figures are the executors' overheads (a demo-model job adds ~10 s of its own here to both).
Both executors serve one job at a time (the local worker's one ``cpu`` slot; a one-node Ray cluster
with 1 CPU, started by this script on the loopback address 127.0.0.2 (Ray swaps 127.0.0.1 for the
machine's interface address) and stopped by its process group).

Usage: .venv/bin/python benchmarks/ray_executor.py [--jobs 20] [--repeats 3] [--same-requests 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.setdefault("LATENCYLAB_CACHE_PATH", str(REPO / "data" / "cache"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

from fake_openai import FakeServer  # noqa: E402

from engine.spec import parse_job_spec  # noqa: E402
from storage import jobs, open_database, runs  # noqa: E402


def spec(base_url: str, name: str):
    workload = {"prompt_tokens": 8, "output_tokens": 4, "requests": 1, "warmup_requests": 0}
    recipe = {"engine": "openai", "base_url": base_url, "model_name": "fake"}
    return parse_job_spec({"model": {"source": "demo"}, "recipe": recipe, "workload": workload, "name": name})


def start_cluster(root: Path) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = root / "head.log"
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--node-ip-address=127.0.0.2",
         f"--port={port}", "--num-cpus=1", "--object-store-memory=80000000", "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir={root}"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while b"Ray runtime started" not in log.read_bytes():
        if time.monotonic() > deadline or head.poll() is not None:
            raise SystemExit(f"the Ray head did not start: {log.read_text()[-500:]}")
        time.sleep(0.2)
    return head, f"127.0.0.2:{port}"


def stop_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def worker(db_url: str, data: Path, executor: list[str], *extra: str) -> subprocess.Popen:
    env = dict(os.environ, LATENCYLAB_DATA_DIR=str(data), PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "engine", "worker", "--db", db_url, *executor, *extra],
        cwd=REPO, env=env, stdout=(data / "worker.log").open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def throughput(db_url: str, data: Path, executor: list[str], base_url: str, n: int) -> dict:
    db = open_database(db_url)
    ids = [jobs.submit(db, spec(base_url, f"tiny {i}"), timeout_s=600) for i in range(n)]
    t0 = time.monotonic()
    proc = worker(db_url, data, executor, "--once")
    proc.wait()
    wall = time.monotonic() - t0
    done = [jobs.get_job(db, i) for i in ids]
    bad = [(j.id, j.status, j.error) for j in done if j.status != "done"]
    if bad:
        raise SystemExit(f"jobs did not finish: {bad[:3]} (log {data / 'worker.log'})")
    span = (max(j.finished_at for j in done) - min(j.claimed_at for j in done)).total_seconds()
    return {"jobs": n, "wall_s": round(wall, 2), "jobs_per_min_wall": round(60 * n / wall, 1),
            "queue_span_s": round(span, 2), "jobs_per_min_queue": round(60 * n / span, 1)}  # fmt: skip


def first_request(db_url: str, data: Path, executor: list[str], server: FakeServer, repeats: int) -> list:
    """Seconds from submit to the server's first request, each with a worker already idle and polling."""
    db = open_database(db_url)
    proc = worker(db_url, data, executor)
    out = []
    try:
        time.sleep(8)  # connected and idle (Ray: ray.init done)
        for i in range(repeats):
            seen = len(server.seen.arrivals_ns)
            t0 = time.perf_counter_ns()  # the same CLOCK_MONOTONIC as the server's stamps
            job_id = jobs.submit(db, spec(server.base_url, f"first {i}"), timeout_s=600)
            while len(server.seen.arrivals_ns) <= seen:
                time.sleep(0.01)
            out.append(round((server.seen.arrivals_ns[seen] - t0) / 1e9, 2))
            while jobs.get_job(db, job_id).status in ("queued", "running"):
                time.sleep(0.1)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    return out


def same_run(db_url: str, data: Path, executor: list[str], requests: int) -> dict:
    """One demo-model job through ``executor``: its fingerprint and TTFT/TPOT p50 with their intervals."""
    db = open_database(db_url)
    workload = {"prompt_tokens": 32, "output_tokens": 32, "requests": requests, "warmup_requests": 1}
    job_id = jobs.submit(db, parse_job_spec({"model": {"source": "demo"}, "workload": workload}), timeout_s=900)
    worker(db_url, data, executor, "--once").wait()
    job = jobs.get_job(db, job_id)
    if job.status != "done":
        raise SystemExit(f"the demo job ended {job.status}: {job.error} (log {data / 'worker.log'})")
    run = runs.get_run(db, job.run_id)
    out = {"fingerprint": run.fingerprint, "node": (run.provenance.get("placement") or {}).get("executor")}
    for key in ("ttft_ms", "tpot_ms"):
        group = run.metrics[key]
        out[key] = {"p50": round(group["p50"], 2), "ci": [round(v, 2) for v in group["ci"]["p50"] or []]}
    return out


def overlap(a: list[float], b: list[float]) -> bool:
    return bool(a and b) and a[0] <= b[1] and b[0] <= a[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="submit -> first request measurements per executor")
    parser.add_argument("--same-requests", type=int, default=16, help="requests of the demo job run by both (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="llbench-", dir="/tmp"))
    server = FakeServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    head, address = start_cluster(root)
    results: dict = {"load_avg_before": list(os.getloadavg())}
    try:
        executors = {"local": ["--devices", "cpu"], "ray": ["--executor", "ray", "--ray-address", address]}
        for name, executor in executors.items():
            data = root / name
            data.mkdir()
            url = f"sqlite:///{data / 'bench.db'}"
            results[name] = throughput(url, data, executor, server.base_url, args.jobs)
            results[name]["submit_to_first_request_s"] = first_request(url, data, executor, server, args.repeats)
            if args.same_requests:
                results[name]["same_run"] = same_run(url, data, executor, args.same_requests)
    finally:
        stop_group(head)
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    results["load_avg_after"] = list(os.getloadavg())
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.jobs} tiny openai jobs, one at a time; load average {results['load_avg_before'][0]:.2f}")
    for name in ("local", "ray"):
        r = results[name]
        print(
            f"{name:>5}: {r['jobs_per_min_wall']:6.1f} jobs/min (worker start to exit, {r['wall_s']} s), "
            f"{r['jobs_per_min_queue']:6.1f} jobs/min (first claim to last end, {r['queue_span_s']} s); "
            f"submit -> first measured request {', '.join(f'{s:.2f}' for s in r['submit_to_first_request_s'])} s"
        )
    if args.same_requests:
        local, ray = results["local"]["same_run"], results["ray"]["same_run"]
        print(
            f"the same demo job ({args.same_requests} requests), fingerprints equal: {local['fingerprint'] == ray['fingerprint']}"
        )
        for key in ("ttft_ms", "tpot_ms"):
            a, b = local[key], ray[key]
            print(
                f"  {key} p50: local {a['p50']} {a['ci']}, ray {b['p50']} {b['ci']}; "
                f"intervals overlap: {overlap(a['ci'], b['ci'])}"
            )


if __name__ == "__main__":
    main()
