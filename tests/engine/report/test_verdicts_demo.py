"""The real demo model on the CPU: repeats of one spec agree; half the layers is a real change.

Four small runs (16 requests, 8 output tokens each), about a minute in all.
"""

from __future__ import annotations

import pytest

from engine.report.compare import compare_runs
from engine.report.export import load_requests, load_runs

WORKLOAD = {"prompt_tokens": 32, "output_tokens": 8, "requests": 16, "batch_size": 1}


def _run(db, name: str, recipe: dict | None = None) -> int:
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec

    spec = parse_job_spec(
        {"model": {"source": "demo"}, "recipe": {"engine": "transformers", **(recipe or {})}, "workload": WORKLOAD}
        | {"name": name}
    )
    return run_benchmark(spec, db=db, log=lambda _m: None).run_id


@pytest.mark.slow
def test_repeats_agree_and_half_the_layers_is_flagged(db, demo_folder):
    ids = [_run(db, f"repeat {i}") for i in range(3)]
    pruned = _run(db, "half the layers", {"drop_layers": 15})
    runs, _missing = load_runs(db, [*ids, pruned])
    requests = load_requests(db, [*ids, pruned])
    tpot = {r.id: (r.metrics["tpot_ms"]["p50"], r.metrics["tpot_ms"]["ci"]["p50"]) for r in runs}
    print({i: (round(p, 2), [round(x, 2) for x in ci]) for i, (p, ci) in tpot.items()})
    # the repeats' 95 % intervals of TPOT p50 overlap, and no repeat differs significantly from another
    repeats = [tpot[i][1] for i in ids]
    assert max(lo for lo, _hi in repeats) <= min(hi for _lo, hi in repeats)
    comparison = compare_runs(runs, ids[0], requests)
    for other in ids[1:]:
        verdict = comparison.verdicts[other]["tpot_ms_p50"]
        assert verdict.state == "same", (verdict, comparison.summaries[other])
        assert "no significant difference in decode" in comparison.summaries[other]
    # 15 of 30 layers dropped: decode is significantly faster, said with its interval
    verdict = comparison.verdicts[pruned]["tpot_ms_p50"]
    assert verdict.state == "better" and verdict.interval.hi < 1.0, comparison.summaries[pruned]
    assert "faster decode (95 % CI " in comparison.summaries[pruned]
