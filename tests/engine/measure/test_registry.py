"""The metric registry: direction, unit and kind of every figure a run reports; bookkeeping is no metric."""

from __future__ import annotations

import pytest
from seed_runs import REAL_QUALITY, real_quality

from engine.measure import registry
from engine.measure.metric import PLACES

# (flat key, the task's stored :kind or None, minimise?, unit)
ACCURACY_KEYS = [
    ("quality.perplexity", None, True, ""),
    ("quality.kl_mean", None, True, "nats"),
    ("quality.kl_p99", None, True, "nats"),
    ("quality.top1_agreement", None, False, "ratio"),
    ("quality.greedy_flip_rate", None, True, "ratio"),
    ("quality.task:count", "multiple choice", False, "ratio"),  # a local JSONL task
    ("quality.task:capitals", "exact match", False, "ratio"),
    ("quality.task:hellaswag", "lm-eval acc_norm,none", False, "ratio"),
    ("quality.task:arc_easy", "lm-eval acc,none", False, "ratio"),
    ("quality.task:wikitext", "lm-eval word_perplexity,none", True, ""),
    ("quality.task:pile_10k", "lm-eval bits_per_byte,none", True, ""),
]


@pytest.mark.parametrize(("key", "kind", "minimise", "unit"), ACCURACY_KEYS)
def test_every_accuracy_key_kind_has_its_direction_and_unit(key, kind, minimise, unit):
    metric = registry.lookup(key, kind)
    assert metric.is_metric and metric.kind == "accuracy"
    assert registry.minimise(key, kind) is minimise
    assert metric.unit == unit


def test_perplexity_type_tasks_are_never_percentages():
    metric = registry.lookup("quality.task:pile_10k", "lm-eval bits_per_byte,none")
    assert metric.format(0.8123) == "0.8123" and "%" not in metric.header
    assert "bits_per_byte" in metric.label
    assert registry.lookup("quality.task:hellaswag", "lm-eval acc_norm,none").format(0.4567) == "45.7%"


def test_bookkeeping_of_a_real_quality_dict_is_no_metric():
    quality = real_quality(tasks={"hellaswag": (0.45, "lm-eval acc_norm,none")}, notes={"scope": "x"})
    metrics = registry.accuracy_metrics(quality)
    assert set(metrics) == {
        "quality.perplexity",
        "quality.kl_mean",
        "quality.kl_p99",
        "quality.top1_agreement",
        "quality.greedy_flip_rate",
        "quality.task:hellaswag",
    }
    bookkeeping = set(quality) - {k.removeprefix("quality.") for k in metrics}
    assert {"window", "stride", "kl_top_k", "corpus_tokens", "baseline_perplexity", "nll_stderr"} <= bookkeeping
    for name in bookkeeping:
        assert not registry.is_metric(f"quality.{name}")
        with pytest.raises(KeyError):
            registry.minimise(f"quality.{name}")
    assert registry.task_kinds(quality) == {"quality.task:hellaswag": "lm-eval acc_norm,none"}


def test_metric_keys_keeps_order_and_filters_kinds():
    keys = ["quality.window", "tpot_ms_p50", "quality.perplexity", "output_tokens_per_s", "completed", "error_rate"]
    assert registry.metric_keys(keys) == ["tpot_ms_p50", "quality.perplexity", "output_tokens_per_s", "error_rate"]
    assert registry.metric_keys(keys, ("accuracy",)) == ["quality.perplexity"]
    hints = {"quality.task:w": "lm-eval word_perplexity,none"}
    assert registry.metric_keys(["quality.task:w", "quality.task:w:kind"], hints=hints) == ["quality.task:w"]


def test_error_rate_from_counts_or_stored():
    assert registry.error_rate({"completed": 3, "failed": 1}) == pytest.approx(0.25)
    assert registry.error_rate({"completed": 3, "failed": 1, "error_rate": 0.5}) == 0.5
    assert registry.error_rate({"completed": 0, "failed": 0}) is None
    assert registry.error_rate(None) is None
    assert registry.failure_words({"completed": 3, "failed": 1}) == "1 of 4 requests failed (25%)"
    assert registry.failure_words({"completed": 4, "failed": 0}) is None


def test_real_quality_is_the_stored_one():
    assert REAL_QUALITY["kl_top_k"] == 256 and REAL_QUALITY["window"] == 512


def test_one_spelling_of_a_key_and_the_older_ones_read_as_it():
    for older in ("tpot_ms_p50", "tpot_ms.p50", "tpot_p50", "TPOT_P50", " tpot.p50 "):
        assert registry.canonical(older) == "tpot_ms_p50"
    assert registry.canonical("tokens_per_s") == "output_tokens_per_s"
    assert registry.canonical("kl_mean") == "quality.kl_mean"
    assert registry.canonical("quality.task:hellaswag") == "quality.task:hellaswag"
    assert registry.canonical("recipe.dtype") == "recipe.dtype"  # not a metric: unchanged, for the caller to refuse


def test_the_places_keep_their_figures_in_display_order():
    # Asked of the declarations, never a hand-kept list: a figure declared later keeps these true.
    for place in PLACES:
        shown = registry.shown_in(place)
        assert [m.order for m in shown] == sorted(m.order for m in shown), place
        assert len({m.key for m in shown}) == len(shown), place  # each figure once
    compare = registry.keys_in("compare")
    headline = [k for k in compare if registry.lookup(k).group is not None]
    assert compare[: len(headline)] == headline  # the latency groups first, in their own order
    design = {"ttft_ms_p50", "tpot_ms_p99", "itl_ms_p90", "e2el_ms_p95", "output_tokens_per_s", "requests_per_s",
              "tokens_per_s_per_user", "goodput_requests_per_s", "peak_memory_bytes", "load_s"}  # fmt: skip
    assert design <= set(registry.keys_in("result"))  # DESIGN.md's result object
    assert {"ttft_ms_p50", "tpot_ms_p50", "output_tokens_per_s", "quality.perplexity"} <= set(
        registry.keys_in("summary")
    )
    assert all(m.interval is not None for m in registry.with_interval())
    assert all(m.compute is not None or m.source for m in registry.REGISTRY.values())  # a computation or a source
