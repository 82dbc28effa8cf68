"""A request source is one module and one registry line: a fake one, registered only here, plans a real run."""

from __future__ import annotations

import pytest

from engine.backends.base import Request
from engine.run import sources
from engine.run.plan import PlannedRequest, RequestPlan
from engine.spec import Workload, parse_job_spec


class CountdownSource:
    """Test double (never registered outside this test): prompts of 6, 5, 4 ... tokens, each asking
    for one token fewer than the one before."""

    name = "countdown"

    def plan(self, workload: Workload, ctx: sources.PlanContext) -> RequestPlan:
        n = workload.warmup + workload.requests
        planned = [
            PlannedRequest(Request(prompt=[7] * (6 - i), max_new_tokens=max(1, 4 - i), ignore_eos=True))
            for i in range(n)
        ]
        return RequestPlan(self.name, planned[: workload.warmup], planned[workload.warmup :], facts={"made": n})


@pytest.fixture
def countdown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sources.SOURCES, "countdown", f"{__name__}:CountdownSource")
    monkeypatch.setattr(Workload, "source", property(lambda self: "countdown"))


def test_an_unknown_source_is_one_line() -> None:
    with pytest.raises(Exception, match="unknown request source 'nope'; available: synthetic, prompt_file"):
        sources.get_source("nope")


@pytest.mark.slow
def test_a_registered_source_plans_a_real_run(countdown: None, db) -> None:
    from engine.run.runner import run_benchmark
    from storage.runs import get_requests, get_run

    spec = parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "workload": {"prompt_tokens": 4, "output_tokens": 4, "requests": 3, "warmup_requests": 1},
        }
    )
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    run = get_run(db, result.run_id)
    measured = [r for r in get_requests(db, result.run_id) if not r.warmup]
    assert [r.prompt_tokens for r in measured] == [5, 4, 3]
    assert [r.output_tokens for r in measured] == [3, 2, 1]  # each its own length
    assert run.provenance["request_source"] == {"name": "countdown", "made": 4}
