"""The SLA finder: bracketing and bisection on a probe function (pure), the SLO rules, and the
stored search advanced through the real job queue (jobs claimed and finished as a worker does)."""

from __future__ import annotations

import pytest

from engine.optimize import sla
from engine.optimize.bisect import next_step
from engine.optimize.slo import goodput_ci, judge, parse_slo, per_request_limits
from engine.spec import SpecError, parse_job_spec
from storage import jobs
from storage import sla as store
from tests.seed_runs import make_run


def search(threshold: float, start: float = 1.0, resolution: float = 0.25, max_probes: int = 20, integer=False):
    """Run the search against a server that meets the SLO up to ``threshold`` (the fake probe)."""
    results: list[tuple[float, bool]] = []
    while True:
        step = next_step(results, start, resolution, max_probes, integer)
        if step.done:
            return [x for x, _ in results], step
        results.append((step.next_load, step.next_load <= threshold))


@pytest.mark.parametrize("threshold", [0.3, 1.0, 3.1, 5.9, 17.0, 250.0])
@pytest.mark.parametrize("start", [1.0, 4.0])
def test_the_answer_brackets_the_true_limit_within_the_resolution(threshold, start) -> None:
    loads, step = search(threshold, start=start)
    assert step.converged and step.low <= threshold < step.high
    assert step.high - step.low <= 0.25
    assert len(loads) == len(set(loads))  # no load probed twice


def test_doubling_then_bisection_probes_in_order() -> None:
    loads, step = search(3.1)
    assert loads == [1.0, 2.0, 4.0, 3.0, 3.5, 3.25]
    assert (step.low, step.high) == (3.0, 3.25)


def test_halving_when_the_start_fails_and_the_floor_when_nothing_passes() -> None:
    loads, step = search(0.3)
    assert loads == [1.0, 0.5, 0.25] and (step.low, step.high) == (0.25, 0.5)
    loads, step = search(0.01)
    assert loads == [1.0, 0.5, 0.25] and step.low is None and not step.converged
    assert "fails even at the lowest load" in step.why


def test_the_probe_budget_ends_the_search_with_the_bracket_so_far() -> None:
    loads, step = search(100.0, max_probes=4)
    assert loads == [1.0, 2.0, 4.0, 8.0] and step.done and not step.converged
    assert (step.low, step.high) == (8.0, None) and step.why == "all 4 probes made"


def test_a_concurrency_axis_probes_whole_numbers() -> None:
    loads, step = search(5.0, resolution=1.0, integer=True)
    assert all(x == int(x) for x in loads) and (step.low, step.high) == (5.0, 6.0)
    loads, step = search(0.5, resolution=1.0, integer=True)
    assert loads == [1.0] and step.low is None


def test_a_noisy_pass_above_a_failure_does_not_widen_the_bracket() -> None:
    step = next_step([(1.0, True), (2.0, True), (4.0, False), (3.0, False), (3.5, True)], 1.0, 0.25, 20)
    assert (step.low, step.high) == (2.0, 3.0) and step.next_load == 2.5


def test_slo_presets_and_custom_terms() -> None:
    name, bounds = parse_slo("mlperf-llama2-70b")
    assert name == "MLPerf llama2-70b Server"
    assert [(b.key, b.limit_ms) for b in bounds] == [("ttft_ms_p99", 2000.0), ("tpot_ms_p99", 200.0)]
    assert [(b.key, b.limit_ms) for b in parse_slo("chat")[1]] == [("ttft_ms_p99", 200.0), ("itl_ms_p99", 50.0)]
    _, bounds = parse_slo("ttft_p90=300, itl=40")  # the older spelling still reads
    assert [(b.key, b.limit_ms) for b in bounds] == [("ttft_ms_p90", 300.0), ("itl_ms_p99", 40.0)]
    _, flat = parse_slo("ttft_ms_p90=300,itl_ms.p99=40")  # the metric key (and the dotted form)
    assert [(b.key, b.limit_ms) for b in flat] == [(b.key, b.limit_ms) for b in bounds]
    assert per_request_limits(parse_slo("chat")[1]) == {"slo_ttft_ms": 200.0}  # ITL has no per-request limit
    for bad in ("", "ttft", "foo_p99=1", "ttft_p42=1", "ttft_p99=-3", "ttft_p99=x", "ttft_p99=1,ttft_p99=2"):
        with pytest.raises(ValueError):
            parse_slo(bad)


def test_judge_checks_each_percentile_and_the_goodput() -> None:
    _, bounds = parse_slo("ttft_p99=300,itl_p99=50")
    metrics = {
        "ttft_ms": {"p99": 250.0},
        "itl_ms": {"p99": 60.0},
        "goodput_fraction": 0.95,
        "completed": 20,
        "failed": 0,
    }
    verdict = judge(bounds, 0.99, metrics)
    assert not verdict["passed"]
    assert verdict["reasons"] == ["ITL p99 60 ms > 50 ms", "goodput 95.0% < 99.0%"]
    lo, hi = verdict["goodput_ci"]
    assert lo < 0.95 < hi <= 1.0
    assert judge(bounds, None, {**metrics, "itl_ms": {"p99": 49.0}})["passed"]
    assert judge(bounds, None, {"ttft_ms": {"p99": None}, "itl_ms": {}})["reasons"][0] == "no TTFT p99 (no samples)"
    assert goodput_ci({"goodput_fraction": 1.0, "completed": 10, "failed": 0})[1] == 1.0


def _definition(**fields):
    base = parse_job_spec({"model": {"source": "demo"}, "workload": {"prompt_tokens": 8, "output_tokens": 4}})
    name, bounds = parse_slo("ttft_p99=100")
    return sla.new_definition(base, name, bounds, **fields)


def test_a_definition_writes_the_per_request_limits_into_each_probe() -> None:
    definition = _definition(start=2.0, resolution=0.5)
    spec = sla.probe_spec(definition, 3.0, "s1")
    assert spec.workload.arrival == "poisson" and spec.workload.rate == 3.0
    assert spec.workload.slo_ttft_ms == 100.0 and spec.name == "s1 · rate 3/s"
    with pytest.raises(SpecError, match="whole number"):
        _definition(axis="concurrency", start=1.5)
    with pytest.raises(SpecError, match="max_probes"):
        _definition(max_probes=0)


def _run_probe(db, job_id: int, ttft_ms: float) -> int:
    """Do what a worker does with a probe job: claim it, store its run (linked), finish it."""
    job = jobs.claim(db, "w1", ["cpu"])
    assert job is not None and job.id == job_id
    rate = job.spec["workload"]["rate"]
    run_id = make_run(
        db,
        ttft_ms=ttft_ms,
        n=10,
        workload={"arrival": "poisson", "rate": rate, "slo_ttft_ms": 100.0},
        extra_metrics={"goodput_fraction": 1.0 if ttft_ms < 90 else 0.0},
        job=(job.id, "w1"),
        sweep=job.sweep,
    )
    jobs.finish(db, job.id, "w1", jobs.DONE)
    return run_id


def test_a_stored_search_queues_one_probe_at_a_time_and_resumes(db) -> None:
    jobs.register_worker(db, "w1", "host", 1, ["cpu"])
    definition = _definition(start=2.0, resolution=1.0, max_probes=5)
    found = sla.start(db, "s1", definition, submitted_by="cli:test")
    assert [p["status"] for p in found.probes] == ["queued"] and found.probes[0]["load"] == 2.0
    assert sla.advance(db, found.id).version == found.version  # its job still waits: nothing changes
    job = jobs.get_job(db, found.probes[0]["job_id"])
    assert job.sweep == "sla:s1" and job.submitted_by == "cli:test"
    # a stale copy of the search (read before another caller changed it) queues nothing
    stale = store.get_search(db, found.id)
    assert store.save(db, stale, stale.probes)
    spec = parse_job_spec(job.spec)
    assert store.queue_probe(db, stale, stale.probes, spec, {"load": 9.0}, sweep="sla:s1", timeout_s=60) is None
    assert len(jobs.list_jobs(db)) == 1
    found = store.get_search(db, found.id)
    latency = {2.0: 50.0, 4.0: 200.0, 3.0: 200.0}
    while not found.is_final:
        probe = found.probes[-1]
        _run_probe(db, probe["job_id"], latency[probe["load"]])
        found = sla.advance(db, found.id)
    assert [(p["load"], p["status"]) for p in found.probes] == [(2.0, "passed"), (4.0, "failed"), (3.0, "failed")]
    assert found.status == "done" and found.answer["text"] == "2 req/s (between 2 and 3) at 99 % goodput"
    assert found.answer["boundary"]["low"]["run_id"] == found.probes[0]["run_id"]
    assert sla.advance_running(db) == []


def test_a_probe_job_that_ends_without_a_run_fails_the_search_with_its_reason(db) -> None:
    found = sla.start(db, "s2", _definition())
    jobs.cancel(db, found.probes[0]["job_id"])
    lines = sla.advance_running(db)
    found = store.find(db, "s2")
    assert found.status == "failed" and "cancelled before it started" in found.error
    assert lines == [f"sla search s2: failed: {found.error}"]
    with pytest.raises(store.SearchExists):
        sla.start(db, "s2", _definition())


def test_the_boundary_probes_carry_their_goodput_intervals() -> None:
    answer = {
        "unit": "req/s",
        "boundary": {
            "low": {"load": 2.0, "run_id": 5, "values": {"goodput_fraction": 0.9667}, "goodput_ci": [0.828, 0.999]},
            "high": {"load": 3.0, "run_id": 6, "values": {"goodput_fraction": 0.5}, "goodput_ci": None},
        },
    }
    assert sla.boundary_words(answer) == (
        "highest passing 2 req/s (run 5, goodput 96.7 %, 95 % CI 82.8-99.9 %); lowest failing 3 req/s (run 6, goodput 50.0 %)"
    )


def test_a_bug_fails_only_its_search_and_a_database_error_is_left_to_the_worker(db, monkeypatch) -> None:
    sla.start(db, "s3", _definition())
    sla.start(db, "s4", _definition())

    def broken(*_args):
        raise RuntimeError("boom")

    monkeypatch.setattr(sla, "advance", broken)
    assert sla.advance_running(db) == [f"sla search {i} failed: RuntimeError: boom" for i in (1, 2)]
    assert store.find(db, "s3").status == "failed" and store.find(db, "s3").error == "RuntimeError: boom"
    store.create(db, "s5", _definition().model_dump(mode="json"))

    def away(*_args):
        raise store.StorageError("database is locked")

    monkeypatch.setattr(sla, "advance", away)
    with pytest.raises(store.StorageError):
        sla.advance_running(db)
    assert store.find(db, "s5").status == "running"
