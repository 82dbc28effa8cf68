"""A study's definition: objectives and their directions from the registry, the accuracy phase the
constraints need, and one-line refusals of what cannot be searched."""

from __future__ import annotations

import pytest
from study_helpers import definition

from engine.spec import SpecError


def test_directions_and_the_accuracy_the_constraints_need():
    d = definition(objectives=["tpot_p50", "ppl_increase_pct"], constraints={"max_kl_mean": 0.1})
    assert d.objective_keys == ("tpot_ms_p50", "ppl_increase_pct")
    assert d.objectives == d.objective_keys  # the older short spelling is stored as the metric key
    slo = definition(constraints={"slo": {"ttft_p99": 300, "tpot_ms.p50": 20}}).constraints.slo
    assert slo == {"ttft_ms_p99": 300, "tpot_ms_p50": 20}
    assert d.directions == ("minimize", "minimize")
    assert d.quality_metrics() == ("fidelity", "ppl")
    assert d.quality_keys() == ("kl_mean", "perplexity")
    assert definition(objectives=["tokens_per_s"]).directions == ("maximize",)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"knobs": ["dtype", "warp_speed"]}, "warp_speed: not a knob of engine transformers"),
        ({"knobs": []}, "name the knobs to search"),
        ({"pin": {"dtype": "float32"}}, "dtype: a knob is either searched or pinned"),
        ({"objectives": ["fastness"]}, "unknown objective 'fastness'"),
        ({"objectives": ["tpot_p50", "ttft_p99", "kl_mean"]}, "two for a Pareto study"),
        ({"constraints": {"slo": {"quality.perplexity": 3}}}, "is not a latency, throughput or memory metric"),
        ({"constraints": {"min_task_accuracy": 0.5}}, "needs a task"),
        ({"pin": {"attention": "flash_attention_2"}}, "the base recipe cannot run: .*flash_attention_2 needs a CUDA"),
        ({"name": "bad/name"}, "a study name is letters"),
    ],
)
def test_bad_definitions_are_refused_in_one_line(overrides, message):
    with pytest.raises(SpecError, match=message) as info:
        definition(**overrides)
    assert "\n" not in str(info.value)


def test_synthetic_weights_have_no_accuracy_constraints():
    base = {"model": {"source": "synthetic:smollm2-135m"}, "workload": {"prompt_tokens": 16, "output_tokens": 4}}
    with pytest.raises(SpecError, match="synthetic weights have no accuracy"):
        definition(base=base)
    assert definition(base=base, constraints={}).quality_metrics() == ()
