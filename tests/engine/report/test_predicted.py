"""Predicted runs in the reports: named as predicted, never given a significance verdict, said as a prediction
(its error against the measured twin beside its band, or "no band claimed"), never queued again."""

from __future__ import annotations

import pytest
from seed_runs import AZURE_TRACE, PREDICTION_BAND, make_predicted_run, make_run

from engine.report.compare import compare_runs, comparison_frame
from engine.report.decision import decision_line, repeat_specs
from engine.report.naming import default_baseline, frame_run_names, run_name
from engine.report.predicted import band_pct, band_words, check_frame, pair_check, prediction_lines
from engine.report.summary import summarize_against
from engine.report.values import flat_metrics
from engine.report.verdicts import NO_TEST, verdicts_between
from storage.frames import RunQuery, query_frame
from storage.runs import get_run

TWIN = {"name": "azure", "workload": AZURE_TRACE, "n": 40}


@pytest.fixture
def twins(db):
    """A measured trace run and its prediction (same spec), TPOT predicted 15 % high, TTFT 2 % high."""
    measured = make_run(db, ttft_ms=60, tpot_ms=20, **TWIN)
    predicted = make_predicted_run(db, ttft_ms=61.2, tpot_ms=23, seed=0, **TWIN)
    return db, get_run(db, measured), get_run(db, predicted)


def test_a_predicted_run_is_named_where_it_was_predicted(twins, db):
    _, measured, predicted = twins
    assert run_name(predicted).endswith("· predicted on test CPU (local, measured)")
    assert "predicted" not in run_name(measured)
    gpu = get_run(db, make_predicted_run(db, hardware="h100-sxm", hardware_name="NVIDIA H100 SXM", tp=2))
    assert run_name(gpu).endswith("predicted on 2 x NVIDIA H100 SXM")
    frame = query_frame(db, RunQuery(predicted=None))
    names = dict(zip(frame["run_id"], frame_run_names(frame), strict=True))
    assert names[gpu.id].endswith("predicted on 2 x NVIDIA H100 SXM") and "predicted" not in names[measured.id]


def test_the_default_baseline_is_the_measured_twin(twins):
    _, measured, predicted = twins
    assert default_baseline([predicted, measured]).id == measured.id


def test_no_significance_verdict_when_either_run_is_predicted(twins):
    _, measured, predicted = twins
    keys = ["tpot_ms_p50", "ttft_ms_p50", "output_tokens_per_s"]
    for base, run in ((measured, predicted), (predicted, measured)):
        found = verdicts_between(base, run, keys, (flat_metrics(base), flat_metrics(run)))
        assert {v.state for v in found.values()} == {"none"} and {v.reason for v in found.values()} == {NO_TEST}
    tpot = verdicts_between(measured, predicted, keys, (flat_metrics(measured), flat_metrics(predicted)))
    assert tpot["tpot_ms_p50"].ratio == pytest.approx(1.15, abs=0.03)  # the plain ratio, no interval


def test_the_summary_and_decision_say_a_prediction_against_its_twin(twins):
    _, measured, predicted = twins
    text = summarize_against(predicted, measured)
    assert "prediction (run 2) vs measurement (run 1)" in text
    assert "decode: predicted vs measured +" in text and "(band ±10 %, outside it)" in text
    assert "first token: predicted vs measured +" in text and "(band ±4 %, within it)" in text
    assert "significant" not in text.replace("no significance test", "") and "caution" not in text
    line = decision_line(predicted, measured)
    assert line.grade == "predicted" and not line.repeat
    assert "decode: predicted vs measured" in line.text and "first token" not in line.text
    assert line.text.endswith("run 2 is predicted, not measured: measure it before deciding.")
    flipped = decision_line(measured, predicted)  # the prediction as the baseline: the same error, the same words
    assert "prediction (run 2) vs measurement (run 1): decode: predicted vs measured +" in flipped.text


def test_an_uncalibrated_prediction_claims_no_band(db):
    measured = get_run(db, make_run(db, ttft_ms=60, tpot_ms=20))
    predicted = get_run(db, make_predicted_run(db, ttft_ms=90, tpot_ms=20, band=None))
    text = summarize_against(predicted, measured)
    assert "first token: predicted vs measured +" in text and "(no band claimed)" in text
    assert band_words(predicted.provenance["prediction"]) == "no band claimed"
    assert prediction_lines(predicted)[0].startswith("uncalibrated")
    pair = pair_check(predicted, measured)
    assert pair is not None and all(c.within is None for c in pair.checks)


def test_two_predictions_are_a_change_said_as_predicted(db):
    a = get_run(db, make_predicted_run(db, tpot_ms=20))
    b = get_run(db, make_predicted_run(db, tpot_ms=10, hardware="h100-sxm", hardware_name="NVIDIA H100 SXM"))
    text = summarize_against(b, a)
    assert "both predicted:" in text and "faster decode" in text and NO_TEST in text
    assert decision_line(b, a).text.endswith("both predicted, not measured: measure them before deciding.")
    assert pair_check(b, a) is None


def test_compare_checks_the_prediction_figure_by_figure(twins):
    _, measured, predicted = twins
    cmp = compare_runs([predicted, measured])
    assert cmp.baseline_id == measured.id and cmp.differences[predicted.id] == []  # hardware: in its name
    pair = cmp.predictions[predicted.id]
    assert pair.twin and pair.heading().endswith("its measured twin (the same spec)")
    table = check_frame(pair)
    assert list(table["figure"])[:2] == ["TPOT p50 (GenAI-Perf: ITL)", "TTFT p50"]
    tpot = table.iloc[0]
    assert tpot["band (LOO median error)"] == "±10 %" and tpot["within the band"] == "no"
    assert tpot["error (predicted ÷ measured − 1)"].startswith("+1")
    shown = comparison_frame(cmp, formatted=True)
    assert f"#{predicted.id} band (predicted)" in shown and f"#{predicted.id} 95 % CI" not in shown
    verdicts = dict(zip(shown["metric"], shown[f"#{predicted.id} verdict"], strict=True))
    assert verdicts["TPOT p50 (GenAI-Perf: ITL)"] == NO_TEST and set(verdicts.values()) == {NO_TEST, "–"}
    assert verdicts["peak memory (measured phase)"] == "–"  # not predicted: nothing to say
    csv = comparison_frame(cmp)
    assert csv[f"#{predicted.id} predicted"].all() and csv[f"#{predicted.id} prediction"].str.startswith("calib").all()
    row = csv[csv["metric"] == "TPOT p50 (GenAI-Perf: ITL)"].iloc[0]
    assert row[f"#{predicted.id} band ±%"] == 10.0 and 10 < row[f"#{predicted.id} error vs measured %"] < 20


def test_the_band_reads_the_stored_shape_and_the_flat_one():
    assert band_pct({"band": PREDICTION_BAND}, "tpot_ms_p50") == 10.0
    assert band_pct({"band": {"ttft_p50_pct": 8.0}}, "ttft_ms_p50") == 8.0
    assert band_pct({"band": None}, "ttft_ms_p50") is None and band_pct({"band": PREDICTION_BAND}, "itl_ms_p50") is None
    assert band_words({"band": PREDICTION_BAND}).endswith("throughput ±10 % (3 runs)")


def test_predicted_runs_are_never_queued_again(twins):
    _, measured, predicted = twins
    specs = repeat_specs([predicted, measured], measured.id)
    assert [s.name for s in specs] == [f"azure (repeat of run 1) (trial {t} of 3)" for t in (1, 2, 3)]
