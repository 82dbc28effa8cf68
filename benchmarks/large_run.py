"""Large runs stay fast: a run summarised and stored after its last response, and its Run page's server time.

1. **After the last response** (synthetic records, ``--requests`` at ``--concurrency``, 32 tokens each,
   ``tests/large_run_seed.py``): each step the runner and ``run --json`` take once the measured phase
   has ended, timed on its own: the metrics with their intervals (``repeat_metrics``), the noise flags,
   the run's aggregates (``engine.measure.aggregates``), storing it (``storage.runs.save_run``, one
   transaction, requests bulk-inserted) and the result object printed. Target: 3 s in all at 10,000
   requests and concurrency 1,024 (intervals included).
2. **The Run page** of a ``--page-requests`` run (100,000): the server time of ``views/run.py``
   (AppTest, caches cleared before each of ``--repeats`` opens), and what it is made of: reading the
   run and its aggregates, the figures and their JSON (what ``st.plotly_chart`` sends), the records the
   diagnostics read. Target: 2 s.
3. ``--real``: one real run against the mock OpenAI server (``tests/mock_openai.py``) at the same
   concurrency, ``python -m engine run --engine openai``: the time from its last response (the stored
   stamps) to its JSON on stdout (stored, summarised and printed).

    .venv/bin/python benchmarks/large_run.py [--requests 10000] [--concurrency 1024] [--page-requests 100000]
        [--repeats 3] [--real] [--ours-args "..."]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the seeds import each other by basename, as the tests do

from tests import mock_openai  # noqa: E402
from tests.large_run_seed import large_requests, large_spec  # noqa: E402


def timed(rows: list[tuple[str, float]], name: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    out = fn()
    rows.append((name, time.perf_counter() - t0))
    return out


def after_last_response(n: int, concurrency: int, work: Path) -> list[tuple[str, float]]:
    """Part 1: the runner's steps after the measured phase, on synthetic records."""
    from engine.measure import aggregates
    from engine.report.results import result_object
    from engine.run import noise
    from engine.run.repeats import Measured, Repeat, repeat_metrics
    from engine.spec import parse_job_spec
    from storage import open_database
    from storage.runs import NewRun, get_run, save_run

    requests = large_requests(n, concurrency)
    spec = large_spec(n, concurrency)
    db = open_database(f"sqlite:///{work / f'after-{n}.db'}")  # created before the clock starts, as a run's is
    warm, measured = [r for r in requests if r.warmup], [r for r in requests if not r.warmup]
    phase = Measured([Repeat(0, measured, measured[0].send_ns, max(r.chunk_ns[-1] for r in measured))])
    rows: list[tuple[str, float]] = []
    metrics = timed(rows, "metrics and intervals", lambda: repeat_metrics(phase, warm, None))
    metrics["noise_flags"] = timed(rows, "noise flags", lambda: noise.noise_flags([], metrics))
    agg = timed(rows, "aggregates", lambda: aggregates.summarise(requests).to_json())
    parsed = parse_job_spec(spec)
    run = NewRun(
        status="done", spec=spec, fingerprint=parsed.fingerprint(), model="synthetic:smollm2-135m", engine="openai",
        device="cpu", metrics=metrics, requests=requests, series={aggregates.KIND: agg},
    )  # fmt: skip
    run_id = timed(rows, "save_run", lambda: save_run(db, run))
    timed(rows, "result object (--json)", lambda: json.dumps(result_object(get_run(db, run_id))))
    return rows


def page_server_time(n: int, concurrency: int, repeats: int, work: Path) -> tuple[list[float], list[tuple[str, float]]]:
    """Part 2: the Run page of a stored ``n``-request run, cold, ``repeats`` times; and its parts."""
    import streamlit as st
    from large_run_seed import store_large_run
    from seed_runs import open_page

    from storage import open_database

    url = f"sqlite:///{work / f'page-{n}.db'}"
    t0 = time.perf_counter()
    run_id = store_large_run(open_database(url), n, concurrency)
    print(f"  (stored a {n:,}-request run in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    os.environ["LATENCYLAB_DB_URL"] = url
    open_page("views/run.py")  # the page's imports, once, as a server has them
    times = []
    for _ in range(repeats):
        st.cache_data.clear()
        st.cache_resource.clear()
        t0 = time.perf_counter()
        at = open_page("views/run.py", run=str(run_id))
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise SystemExit(f"the Run page failed: {at.exception}")
    return times, page_parts(open_database(url), run_id)


def page_parts(db: Any, run_id: int) -> list[tuple[str, float]]:
    """What the page's server time is made of (outside Streamlit)."""
    from engine.measure.aggregates import KIND, Aggregates
    from engine.report import distributions as d
    from engine.report import timeseries as ts
    from engine.report.diagnostics import diagnose
    from storage.runs import get_run
    from storage.series import get_series

    rows: list[tuple[str, float]] = []
    run = timed(rows, "read the run", lambda: get_run(db, run_id))
    agg = timed(rows, "read its aggregates", lambda: Aggregates.from_json(get_series(db, run_id, KIND)))

    def figures() -> None:
        s = d.latency_samples_of(agg)
        for key in ("ttft_ms", "tpot_ms", "itl_ms"):
            d.cdf_figure({"run": s[key]}, key).to_json()
            d.histogram_figure(s["itl_hist"] if key == "itl_ms" else s[key], key).to_json()
        d.timeline_of(agg).to_json()
        ts.over_time_figure(agg).to_json()
        d.token_figure_of(agg, d.Requested.from_spec(run.spec)).to_json()

    timed(rows, "figures and their JSON", figures)
    records = timed(rows, "records for diagnostics", agg.endpoint_records)
    timed(rows, "diagnostics", lambda: diagnose(run, records, None, None))
    return rows


def real_run(args: argparse.Namespace, work: Path) -> str:
    """Part 3: ``python -m engine run`` against the mock; last response to its JSON, and the client's wall."""
    from storage import open_database
    from storage.runs import get_requests

    server = mock_openai.start(mock_openai.Shape(100.0, 20.0, 32))
    db_url = f"sqlite:///{work / 'real.db'}"
    cmd = [sys.executable, "-m", "engine", "run", "--engine", "openai", "--model", "synthetic:smollm2-135m"]
    cmd += ["--base-url", server.url, "--served-model", mock_openai.MODEL, "--arrival", "concurrency"]
    cmd += ["--max-concurrency", str(args.concurrency), "--requests", str(args.requests), "--output-tokens", "32"]
    cmd += ["--warmup", "2", "--db", db_url, "--json", *shlex.split(args.ours_args)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}  # JSON out at once
    env.pop("LATENCYLAB_DB_URL", None)
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines, printed_ns = [], 0
        for line in proc.stdout or []:  # the JSON is printed once the run is stored and summarised
            lines.append(line)
            printed_ns = time.perf_counter_ns()
        proc.wait(3600)
        exited_ns = time.perf_counter_ns()
    finally:
        mock_openai.stop(server.process)
    stdout = "".join(lines)
    if proc.returncode != 0:
        return f"the real run failed ({proc.returncode}): {stdout.strip().splitlines()[-1:]}"
    obj = json.loads(stdout[stdout.index("{") :])
    records = get_requests(open_database(db_url), int(obj["run_id"]))
    last = max(r.chunk_ns[-1] for r in records if r.chunk_ns)
    return (
        f"real run: {obj.get('completed')} ok, {obj.get('failed')} failed, TTFT p50 {obj['ttft_ms']['p50']:.0f} ms, "
        f"{time.perf_counter() - t0:.0f} s in all; last response -> JSON printed (stored, summarised): "
        f"{(printed_ns - last) / 1e9:.2f} s; -> process exited: {(exited_ns - last) / 1e9:.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=1024)
    ap.add_argument("--page-requests", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--real", action="store_true", help="also one real run against the mock server")
    ap.add_argument("--ours-args", default="", help="appended to the real run's command line")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="large_run-") as tmp:
        work = Path(tmp)
        print(f"{os.cpu_count()} cores; load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        rows = after_last_response(args.requests, args.concurrency, work)
        print(f"after the last response, {args.requests:,} requests at c{args.concurrency} (32 tokens each):")
        for name, s in rows:
            print(f"  {name:<28}{s:7.2f} s")
        total = sum(s for _, s in rows)
        print(f"  {'in all':<28}{total:7.2f} s  (target 3 s: {'met' if total <= 3 else 'NOT met'})")
        times, parts = page_server_time(args.page_requests, args.concurrency, args.repeats, work)
        med = statistics.median(times)
        print(
            f"Run page of a {args.page_requests:,}-request run, server time (AppTest, cold caches): "
            f"median {med:.2f} s of {', '.join(f'{t:.2f}' for t in times)} (target 2 s: {'met' if med <= 2 else 'NOT met'})"
        )
        for name, s in parts:
            print(f"  {name:<28}{s:7.2f} s")
        if args.real:
            print(real_run(args, work))
        print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
