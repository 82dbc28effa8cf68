"""Ratios to a baseline and the PM summary, including missing metrics and accuracy."""

from __future__ import annotations

import pytest
from seed_runs import seed_basic

from engine.report.compare import compare_runs, comparison_frame, recipe_in_words, spec_difference, summarize_against
from storage.runs import get_run


@pytest.fixture
def runs(db):
    ids = seed_basic(db)
    return ids, {k: get_run(db, v) for k, v in ids.items()}


def test_ratios_and_summary(runs):
    ids, r = runs
    cmp = compare_runs([r["base"], r["fast"]], ids["base"])
    tpot = cmp.ratios[ids["fast"]]["tpot_ms_p50"]
    assert 0.3 < tpot < 0.5  # 8 ms vs 20 ms
    assert cmp.ratios[ids["base"]]["tpot_ms_p50"] == pytest.approx(1.0)
    text = cmp.summaries[ids["fast"]]
    assert text.startswith("INT4: ")
    assert "x faster decode (TPOT p50)" in text
    assert "perplexity +0.4 %" in text
    assert "peak memory -60 %" in text
    assert "top-1 agreement 96.0 %" in text


def test_slower_and_synthetic_accuracy(runs):
    ids, r = runs
    text = summarize_against(r["base"], r["fast"])
    assert "slower decode" in text
    synth = summarize_against(r["synth"], r["base"])
    assert "no accuracy (synthetic weights)" in synth
    assert "FP32" not in synth.split(":")[0]  # unnamed run labelled by what differs


def test_missing_accuracy_and_failed(runs, db):
    ids, r = runs
    from seed_runs import make_run

    plain = get_run(db, make_run(db, name="no-acc", tpot_ms=20))
    assert "accuracy not measured" in summarize_against(plain, r["base"])
    assert "out of memory" in summarize_against(r["failed"], r["base"])
    assert "nothing to compare against" in summarize_against(r["base"], r["failed"])
    # a failed baseline still gives a table without raising
    cmp = compare_runs([r["failed"], r["base"]], ids["failed"])
    frame = comparison_frame(cmp)
    assert cmp.ratios[ids["base"]]["tpot_ms_p50"] is None
    assert not frame.empty


def test_default_baseline_and_frame(runs):
    ids, r = runs
    cmp = compare_runs([r["fast"], r["base"]], baseline_id=999)
    assert cmp.baseline_id == ids["fast"]
    frame = comparison_frame(cmp, formatted=True)
    assert "metric" in frame.columns and any("(baseline)" in c for c in frame.columns)
    assert any(c.endswith("÷ baseline") for c in frame.columns)
    assert "perplexity" in frame["metric"].tolist()
    with pytest.raises(ValueError):
        compare_runs([])


def test_words(runs):
    _ids, r = runs
    words = recipe_in_words(r["fast"].spec)
    assert words.startswith("transformers") and "dtype bfloat16" in words and "batch 1" in words
    assert "dtype" in spec_difference(r["fast"].spec, r["base"].spec)
