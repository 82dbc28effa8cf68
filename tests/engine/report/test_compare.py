"""Ratios to a baseline and the PM summary, with real quality dicts, tasks, failures and workload differences."""

from __future__ import annotations

import re

import pytest
from seed_runs import make_run, real_quality, seed_basic

from engine.report.compare import compare_runs, comparison_frame, recipe_in_words, spec_difference, summarize_against
from engine.report.verdict_words import change_words
from storage.runs import get_run

BOOKKEEPING_WORDS = (
    "window",
    "stride",
    "kl top k",
    "kl positions",
    "corpus",
    "baseline perplexity",
    "nll",
    "stderr",
    "tokens ±",
    "timings",
    "greedy flip tokens",
)


@pytest.fixture
def runs(db):
    ids = seed_basic(db)
    return ids, {k: get_run(db, v) for k, v in ids.items()}


def test_summary_states_only_the_headline_changes(runs):
    ids, r = runs
    cmp = compare_runs([r["base"], r["fast"]], ids["base"])
    tpot = cmp.ratios[ids["fast"]]["tpot_ms_p50"]
    assert 0.3 < tpot < 0.5  # 8 ms vs 20 ms
    assert cmp.ratios[ids["base"]]["tpot_ms_p50"] == pytest.approx(1.0)
    text = cmp.summaries[ids["fast"]]
    # both runs carry a real quality dict (window, stride, kl_top_k, corpus_tokens, baseline_perplexity, ...)
    # 6 requests a run: decode 20 -> 8 ms is significant; first token 60 -> 55 ms (±10 % jitter) is not, and
    # its interval reaches past ± 5 %: not enough data; perplexity +0.4 % is far inside two standard errors
    # of a 1,022-token corpus (unpaired: these quality dicts keep no per-block NLL), so not enough data either
    assert re.fullmatch(
        r"run 2 · INT4 · bfloat16: 2\.\d+× faster decode \(significant, 95 % CI 2\.\d+–2\.\d+×\), first token: not "
        r"enough data \(95 % CI from 1\.\d+× faster to 1\.\d+× slower\), perplexity: not enough data \(95 % CI from "
        r"24 % better to 25 % worse\), peak memory -60 %",
        text,
    ), text
    for word in BOOKKEEPING_WORDS:
        assert word not in text.lower()


def test_table_and_its_directions_come_from_the_registry(runs):
    ids, r = runs
    frame = comparison_frame(compare_runs([r["base"], r["fast"]], ids["base"]))
    labels = frame["metric"].tolist()
    assert "perplexity" in labels and "top-1 agreement vs reference" in labels and "failed requests" in labels
    for word in BOOKKEEPING_WORDS:
        assert not any(word in label.lower() for label in labels), word
    assert set(frame["better"]) == {"lower", "higher"}
    better = dict(zip(frame["metric"], frame["better"], strict=True))
    assert better["top-1 agreement vs reference"] == "higher" and better["output tokens/s"] == "higher"
    assert better["perplexity"] == "lower"


def test_tasks_in_their_own_units(db):
    tasks = {
        "count": (0.50, "multiple choice"),
        "wikitext": (21.0, "lm-eval word_perplexity,none"),
    }
    later = {"count": (0.48, "multiple choice"), "wikitext": (22.05, "lm-eval word_perplexity,none")}
    base = get_run(db, make_run(db, name="base", quality=real_quality(tasks=tasks)))
    run = get_run(db, make_run(db, name="q", quality=real_quality(perplexity=16.6, tasks=later)))
    text = summarize_against(run, base)
    # stderr 0.01 each: -2 pts ± 2.8 pts, in points (an accuracy share)
    assert "count: not enough data (95 % CI from 4.8 pts worse to 0.83 pts better)" in text
    # significant: 1.05 ± 2 x 0.014, in percent (a perplexity is not a share)
    assert "wikitext (word_perplexity) 5.0 % worse (significant, 95 % CI 4.9–5.1 %)" in text
    frame = comparison_frame(compare_runs([base, run], base.id), formatted=True).set_index("metric")
    assert frame.loc["wikitext (word_perplexity)", "unit"] == ""
    assert frame.loc["wikitext (word_perplexity)", "better"] == "lower"
    assert "%" not in frame.loc["wikitext (word_perplexity)"].iloc[2]
    assert frame.loc["count", "better"] == "higher" and frame.loc["count"].iloc[2].endswith("%")


def test_bits_per_byte_is_not_a_percentage(db):
    kind = "lm-eval bits_per_byte,none"
    base = get_run(db, make_run(db, name="base", quality=real_quality(tasks={"pile": (0.80, kind)})))
    run = get_run(db, make_run(db, name="q", quality=real_quality(tasks={"pile": (0.82, kind)})))
    text = summarize_against(run, base)
    assert "pile (bits_per_byte): not enough data (95 % CI from 1.0 % better to 6.0 % worse)" in text
    assert "pts" not in text


def test_fidelity_without_perplexity_is_labelled_vs_reference(db):
    quality = {k: v for k, v in real_quality(kl_mean=0.02, top1=0.955).items() if "perplexity" not in k}
    base = get_run(db, make_run(db, name="other run", seed=3))
    run = get_run(db, make_run(db, name="q", quality=quality))
    assert "top-1 agreement 95.5% vs reference" in summarize_against(run, base)


def test_workload_differences_are_said_not_credited_to_the_recipe(db):
    small = {"prompt_tokens": 16, "output_tokens": 4, "requests": 2}
    big = {"prompt_tokens": 64, "output_tokens": 16, "requests": 4}
    a = get_run(db, make_run(db, name="A", ttft_ms=20, workload=small))
    b = get_run(db, make_run(db, name="B", ttft_ms=52, workload=big))
    cmp = compare_runs([b, a], b.id)
    text = cmp.summaries[a.id]
    assert "faster first token" in text
    assert "caution, not the recipe alone" in text
    assert "prompt tokens 16 (baseline 64)" in text and "requests 2 (baseline 4)" in text
    assert cmp.differences[a.id] == [
        "prompt tokens 16 (baseline 64)",
        "output tokens 4 (baseline 16)",
        "requests 2 (baseline 4)",
    ]
    same = get_run(db, make_run(db, name="C", ttft_ms=30, workload=big))
    assert "caution" not in summarize_against(same, b) and compare_runs([b, same]).differences[same.id] == []


@pytest.mark.parametrize(
    ("tpot_ms", "expected"),
    [
        (20.8, "4.0 % slower"),  # 0.96x the speed: never "1.0x faster"
        (19.2, "4.2 % faster"),
        (20.2, "1.0 % slower"),
        (11.0, "1.82× faster"),
        (36.0, "1.8× slower"),
    ],
)
def test_ratio_words(tpot_ms, expected):
    text = change_words("tpot_ms_p50", tpot_ms / 20.0)
    assert text == expected
    assert not re.search(r"\b1\.0×", text)


def test_failure_rate_is_in_the_summary_and_the_table(db):
    base = get_run(db, make_run(db, name="base"))
    run = get_run(db, make_run(db, name="flaky", failed_requests=2))
    text = summarize_against(run, base)
    assert text.startswith(f"run {run.id} · flaky · float32: 2 of 6 requests failed (33%), ")
    assert "baseline: 2 of 6 requests failed" in summarize_against(base, run)
    frame = comparison_frame(compare_runs([base, run], base.id), formatted=True).set_index("metric")
    assert frame.loc["failed requests", f"run {run.id} · flaky · float32"] == "33.3%"


def test_slower_and_synthetic_accuracy(runs):
    ids, r = runs
    text = summarize_against(r["base"], r["fast"])
    assert "slower decode" in text
    synth = summarize_against(r["synth"], r["base"])
    assert "no accuracy (synthetic weights)" in synth
    assert "model synthetic:smollm2-135m (baseline demo)" in synth  # a different model is said
    assert "FP32" not in synth.split(":")[0]  # unnamed run labelled by what differs


def test_missing_accuracy_and_failed(runs, db):
    ids, r = runs
    plain = get_run(db, make_run(db, name="no-acc", tpot_ms=20))
    assert "accuracy not measured" in summarize_against(plain, r["base"])
    assert "out of memory" in summarize_against(r["failed"], r["base"])
    assert "nothing to compare against" in summarize_against(r["base"], r["failed"])
    # a failed baseline still gives a table without raising
    cmp = compare_runs([r["failed"], r["base"]], ids["failed"])
    frame = comparison_frame(cmp)
    assert cmp.ratios[ids["base"]]["tpot_ms_p50"] is None
    assert not frame.empty


def test_failed_run_without_a_reason_never_reads_none(db):
    base = get_run(db, make_run(db, name="base"))
    broken = get_run(db, make_run(db, name="broken", status="failed"))
    text = summarize_against(broken, base)
    assert "no reason recorded" in text and "None" not in text


def test_default_baseline_and_frame(runs):
    ids, r = runs
    cmp = compare_runs([r["fast"], r["base"]], baseline_id=999)
    assert cmp.baseline_id == ids["base"]  # both change one knob (dtype): the oldest
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
