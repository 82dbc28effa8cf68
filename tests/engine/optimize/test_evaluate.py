"""A trial's outcome: a broken constraint is never feasible, an unmeasured one neither."""

from __future__ import annotations

from types import SimpleNamespace

from study_helpers import definition

from engine.optimize.evaluate import evaluate, figures


def _run(tpot=50.0, ppl=20.0, ttft99=300.0):
    metrics = {
        "tpot_ms": {"p50": tpot},
        "ttft_ms": {"p50": ttft99 / 2, "p99": ttft99},
        "output_tokens_per_s": 1000 / tpot,
    }
    return SimpleNamespace(metrics=metrics, quality=None if ppl is None else {"perplexity": ppl})


def test_perplexity_three_times_the_base_is_never_feasible():
    d = definition()
    base = figures(_run(ppl=20.0), None)
    out = evaluate(d, _run(tpot=20.0, ppl=60.0), base)
    assert out.values == [20.0]
    assert out.measured["ppl_increase_pct"] == 200.0
    assert not out.feasible
    assert out.broken == ["perplexity increase <= 2 % (measured +200.0 %)"]
    assert out.violations() == {"ppl_increase": 99.0}  # (200 - 2) / 2: broken by 99 bounds


def test_within_the_bound_is_feasible_and_the_base_is_its_own_yardstick():
    d = definition()
    base_run = _run(ppl=20.0)
    base = figures(base_run, None)
    assert evaluate(d, base_run, base).feasible
    near = evaluate(d, _run(ppl=20.2), base)
    assert (
        near.feasible and round(near.measured["ppl_increase_pct"], 6) == 1.0 and near.violations()["ppl_increase"] < 0
    )


def test_a_constraint_not_measured_breaks_and_a_missing_objective_is_said():
    d = definition()
    out = evaluate(d, _run(ppl=None), figures(_run(), None))
    assert not out.feasible and out.broken == ["perplexity increase <= 2 %: not measured"]
    missing = evaluate(d, SimpleNamespace(metrics={}, quality={"perplexity": 20.0}), figures(_run(), None))
    assert missing.values is None and missing.missing == "tpot_ms_p50"


def test_slo_direction_comes_from_the_registry():
    d = definition(constraints={"slo": {"ttft_ms_p99": 250.0, "output_tokens_per_s": 25.0}})
    ok = evaluate(d, _run(tpot=20.0, ttft99=200.0), {})
    assert ok.feasible  # TTFT lower is better: 200 <= 250; tokens/s higher is better: 50 >= 25
    slow = evaluate(d, _run(tpot=50.0, ttft99=400.0), {})
    assert sorted(slow.constraints) == ["slo:output_tokens_per_s", "slo:ttft_ms_p99"]
    assert [c["ok"] for c in slow.constraints.values()] == [False, False]
