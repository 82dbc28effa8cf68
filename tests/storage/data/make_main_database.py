"""Make ``main_0009.db``: a small database as LatencyLab's main wrote it before the project had its
own Alembic version table (``alembic_version`` holding ``0009_sla``, Optuna's tables beside ours).

Run from a checkout of commit 4ee03bf (the main of 2026-12-01), never from a newer one: a newer
checkout writes the new layout, and the test of the carry-over would then test nothing::

    git worktree add /tmp/main-4ee03bf 4ee03bf && cd /tmp/main-4ee03bf
    python tests/storage/data/make_main_database.py OUT.db

Everything goes through the project's own API: three runs with raw stamps (tests/seed_runs.py),
a queued job, a registered worker, and a recipe study driven by ``engine.optimize.driver.advance``
(which opens Optuna on the same URL) whose first trial was measured and told, the second asked.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from seed_runs import make_run, real_quality  # noqa: E402

from engine.optimize.driver import advance  # noqa: E402
from engine.optimize.sampling import rdb_storage  # noqa: E402
from engine.optimize.study import parse_definition  # noqa: E402
from engine.spec import parse_job_spec  # noqa: E402
from storage import jobs, open_database, studies  # noqa: E402
from storage.runs import NewRun, save_run  # noqa: E402

STUDY = {
    "name": "carried",
    "base": {"model": {"source": "demo"}, "workload": {"prompt_tokens": 16, "output_tokens": 8, "requests": 2}},
    "objectives": ["tpot_p50"],
    "constraints": {"max_ppl_increase_pct": 2.0},
    "budget": {"trials": 3},
    "knobs": ["dtype", "quantization"],
    "values": {"dtype": ["float32", "bfloat16"], "quantization": ["none", "torch_dynamic_int8"]},
}


def _measure(db: object, job_id: int) -> int:
    """Play the worker for one trial's job: claim it, store a done run, end it."""
    job = jobs.claim(db, "w-main", ["cpu"])
    assert job is not None and job.id == job_id, job
    jobs.mark_started(db, job_id, "w-main")
    run_id = save_run(
        db,
        NewRun(
            status="done",
            spec=job.spec,
            fingerprint=job.fingerprint,
            model="demo",
            engine="transformers",
            device="cpu",
            metrics={"tpot_ms": {"p50": 50.0}, "ttft_ms": {"p50": 100.0, "p99": 150.0}, "output_tokens_per_s": 20.0},
            quality={"perplexity": 20.0, "perplexity_tokens": 127},
            job_id=job_id,
            worker_id="w-main",
        ),
    )
    jobs.finish(db, job_id, "w-main", "done")
    return run_id


def main(out: Path) -> None:
    url = f"sqlite:///{out}"
    db = open_database(url)
    make_run(db, name="fp32 baseline", quality=real_quality())
    make_run(db, name="bf16", dtype="bfloat16", tpot_ms=8.0, seed=1, quality=real_quality(perplexity=16.5))
    make_run(db, name="sweep point", sweep="rates", seed=2)
    jobs.register_worker(db, "w-main", "host", 1, ["cpu"])
    d = parse_definition(STUDY)
    study = studies.create_study(db, d.name, d.model_dump(mode="json"), submitted_by="maker")
    advance(db, study.name)  # seeds Optuna, queues trial 0
    [trial0] = studies.list_trials(db, study.id)
    _measure(db, trial0.job_id)
    advance(db, study.name)  # tells trial 0 COMPLETE, asks trial 1
    jobs.submit(db, parse_job_spec({"model": {"source": "demo"}, "name": "queued job"}), timeout_s=600.0)
    db.engine.dispose()
    rdb_storage(url).engine.dispose()
    con = sqlite3.connect(out)  # one self-contained file: no WAL beside it, no free pages
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("VACUUM")
    con.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
