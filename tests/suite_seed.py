"""Suites over hand-made runs: a suite built from seed_runs specs, and its jobs run by a pretend worker."""

from __future__ import annotations

from typing import Any

from seed_runs import make_run, spec_dict

from engine.jobs.suites import Suite, parse_suite, queue_suite
from storage import jobs

WORKLOAD = {"requests": 30}
WORKER = "test-worker"


def suite_of(gates: list[dict], entries: dict[str, dict] | None = None, name: str = "t") -> Suite:
    """A suite named ``name`` with ``gates``; ``entries`` maps an entry name to spec_dict keywords."""
    entries = entries if entries is not None else {"fp32": {}}
    return parse_suite(
        {
            "name": name,
            "gates": gates,
            "entries": [{"name": n, "spec": spec_dict(workload=WORKLOAD, **kw)} for n, kw in entries.items()],
        }
    )


def run_suite(db: Any, suite: Suite, runs: dict[str, dict], tag: str | None = None) -> dict[str, int]:
    """Queue ``suite`` under ``tag``, then store a seeded run for each job as its worker would: ``{entry: run id}``.

    ``runs`` maps an entry name to make_run keywords (the entry's spec keywords must be repeated there).
    """
    job_ids = queue_suite(db, suite, tag=tag)
    jobs.register_worker(db, WORKER, "test", 1, ["cpu"])
    entry_of = dict(zip(job_ids, (e.name for e in suite.entries), strict=True))
    out = {}
    for _ in job_ids:
        job = jobs.claim(db, WORKER, ["cpu"])
        entry = entry_of[job.id]
        out[entry] = make_run(db, job=(job.id, WORKER), workload=WORKLOAD, n=30, **runs[entry])
        jobs.finish(db, job.id, WORKER, jobs.DONE)
    return out
