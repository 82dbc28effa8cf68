"""How long a load sweep of the demo model takes, and how much of it is loading (issue 33: the model loads once per
sweep where the engine allows it).

Runs ``python -m engine sweep`` as a user would, on a fresh database, for each engine asked, and prints per
engine: the sweep's wall time, how many times the model was loaded (the ``loaded ...`` lines), the point
processes started, and each stored run's load time and ``run_on_load`` (which run on its load it was). Run it on
a commit from before the change for the figures to compare (every point then loads).

    .venv/bin/python benchmarks/sweep_load_once.py [--engines transformers,vllm-server] [--rates 0.5,1,2]
        [--requests 6]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def sweep_once(engine: str, rates: str, requests: int, folder: Path) -> dict[str, object]:
    url = f"sqlite:///{folder / f'{engine}.db'}"
    args = ["--model", "demo", "--engine", engine, "--prompt-tokens", "64", "--output-tokens", "16"]
    args += ["--requests", str(requests), "--warmup", "1", "--rates", rates, "--sweep", f"bench-{engine}"]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "sweep", "--db", url, "--json", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3600,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"engine": engine, "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    from storage import open_database
    from storage.runs import get_run

    db = open_database(url)
    runs = [get_run(db, p["run_id"]) for p in json.loads(proc.stdout)["points"]]
    return {
        "engine": engine,
        "wall_s": round(wall, 1),
        "loads": sum(1 for line in proc.stderr.splitlines() if line.startswith("loaded ")),
        "processes": proc.stderr.count("running in process"),
        "load_s": [round(r.metrics.get("load_s") or 0, 1) for r in runs],
        "run_on_load": [(r.provenance.get("load_shared") or {}).get("run_on_load") for r in runs],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="transformers,vllm-server")
    p.add_argument("--rates", default="0.5,1,2")
    p.add_argument("--requests", type=int, default=6)
    args = p.parse_args()
    if args.requests < 1:
        p.error("--requests must be at least 1")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as folder:
        for engine in args.engines.split(","):
            print(json.dumps(sweep_once(engine.strip(), args.rates, args.requests, Path(folder))))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
