"""The serving calibration's fit: it recovers the step costs runs were simulated with (as far as runs can tell
them apart), its leave-one-out band measures held-out error, and a run it never saw is predicted."""

from __future__ import annotations

import pytest
from predict_seed import TRUE, calibration_runs, measured, spec

from engine.whatif.predict.fitting import (
    HeldOut,
    band_of,
    fit_costs,
    headline,
    leave_one_out,
    predicted_headline,
    prior_costs,
    run_residuals,
)
from engine.whatif.serving import StepBatch, StepModel


@pytest.fixture(scope="module")
def runs():
    return calibration_runs()


def _step_ms(costs, served, batch: StepBatch) -> float:
    return 1e3 * StepModel(served, 1, costs).batch_time(batch)


def test_the_true_costs_leave_no_residual(runs):
    for pair in runs:
        assert abs(run_residuals(pair, TRUE)).max() < 1e-6


def test_the_fit_recovers_the_costs_the_runs_were_made_with(runs):
    prior = prior_costs("vllm", "cpu")
    fitted = fit_costs(runs, prior)
    served = runs[0].case.deployment.served
    # what the runs tell apart: a decode step of 1 and of 8 sequences, a 256-token prefill, a new request
    for batch in (
        StepBatch(seqs=1, decode_tokens=1, logits=1, context_tokens=70, attention_pairs2=140, output_tokens=1),
        StepBatch(seqs=8, decode_tokens=8, logits=8, context_tokens=8 * 300, attention_pairs2=8 * 600, output_tokens=8),
        StepBatch(seqs=1, prefill_tokens=256, logits=1, context_tokens=256, attention_pairs2=256 * 257, arrivals=1),
    ):
        assert _step_ms(fitted, served, batch) == pytest.approx(_step_ms(TRUE, served, batch), rel=0.03)
    assert _step_ms(prior, served, StepBatch(seqs=1, decode_tokens=1, logits=1)) != pytest.approx(
        _step_ms(TRUE, served, StepBatch(seqs=1, decode_tokens=1, logits=1)), rel=0.1
    )  # the prior was far from the truth: the fit moved it
    assert fitted.eff_compute == pytest.approx(TRUE.eff_compute, rel=0.1)  # prefill tells compute apart


def test_a_run_the_fit_never_saw_is_predicted(runs):
    fitted = fit_costs(runs, prior_costs("vllm", "cpu"))
    unseen = measured(9, spec({"requests": 40, "arrival": "gamma", "rate": 8.0, "burstiness": 0.3, "seed": 5}))
    predicted = predicted_headline(unseen.case, fitted)
    truth = headline(unseen.observed.metrics)
    for key in ("ttft_p50", "tpot_p50", "e2el_p90", "throughput"):
        assert predicted[key] == pytest.approx(truth[key], rel=0.05), key


def test_the_leave_one_out_band_is_small_when_the_model_holds_and_grows_when_a_run_does_not(runs):
    prior = prior_costs("vllm", "cpu")
    held = leave_one_out(runs, prior)
    assert [h.run_id for h in held] == [1, 2, 3]
    band = band_of(held)
    assert band.n_runs == 3 and band.pct["tpot_p50"] < 10 and band.pct["e2el_p90"] < 10  # 2 runs, 6 costs
    odd = [*runs[:2], measured(3, runs[2].observed.spec, slower=1.3)]  # a run 30 % slower than the model says
    worse = band_of(leave_one_out(odd, prior))
    assert worse.pct["e2el_p90"] > band.pct["e2el_p90"] + 5
    assert "LOO median error" in band.words and "(3 runs)" in band.words


def test_one_run_has_no_band():
    assert leave_one_out(calibration_runs()[:1], prior_costs("vllm", "cpu")) == []
    assert band_of([]) is None
    held = HeldOut(1, {"ttft_p50": 110.0, "tpot_p50": None}, {"ttft_p50": 100.0, "tpot_p50": 5.0})
    assert held.errors() == pytest.approx({"ttft_p50": 0.1})
