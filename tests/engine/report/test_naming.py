"""Runs named by their recipe in words, and Compare's default baseline (issue 26, items 1 and 2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pandas as pd
import pytest

from engine.report.naming import (
    changes_in_words,
    default_baseline,
    frame_run_names,
    recipe_title,
    run_name,
    short_model,
    why_baseline,
)


def _run(run_id: int, recipe: dict | None = None, name: str | None = None, minutes: int = 0, status: str = "done"):
    spec = {"model": {"source": "demo"}, "recipe": {"engine": "transformers", **(recipe or {})}}
    at = datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    return SimpleNamespace(id=run_id, spec=spec, engine="transformers", name=name, created_at=at, status=status)


@pytest.mark.parametrize(
    ("changed", "words"),
    [
        ({}, "engine defaults"),
        ({"quantization": "torchao_int8_weight_only"}, "INT8 weight-only (torchao)"),
        ({"drop_layers": 2}, "drop 2 layers"),
        ({"drop_layers": 4}, "drop 4 layers"),  # the "Drop N layers" preset is said by its knob
        ({"quantization": "gptq", "gptq_bits": 3}, "GPTQ 3-bit g128"),
        ({"dtype": "bfloat16", "drop_layers": 1}, "bfloat16 · drop 1 layer"),
        ({"cache_implementation": "static", "compile": True}, "Static cache + compile"),
    ],
)
def test_a_recipe_in_words_is_a_preset_name_or_its_knobs(changed, words):
    assert changes_in_words(changed, "transformers") == words


def test_other_engines_lead_with_their_name():
    assert changes_in_words({}, "vllm") == "vllm defaults"
    assert changes_in_words({"max_num_seqs": 16}, "vllm") == "vllm: max num seqs 16"


def test_a_run_is_named_by_its_number_its_name_and_its_recipe():
    assert run_name(_run(3, {"quantization": "torchao_int8_weight_only"})) == "run 3 · INT8 weight-only (torchao)"
    assert run_name(_run(4, {"drop_layers": 2}, name="pruned")) == "run 4 · pruned · drop 2 layers"
    assert run_name(_run(5, {"dtype": "bfloat16"}, name="bfloat16 nightly")) == "run 5 · bfloat16 nightly"
    assert recipe_title(None) == "engine defaults"


def test_the_default_baseline_is_the_engine_defaults_not_the_newest_ticked():
    """Issue 26, item 1: ticking baseline and INT8 opened Compare with INT8 (the newest) as the baseline."""
    base = _run(1, {}, minutes=0)
    int8 = _run(2, {"quantization": "torchao_int8_weight_only"}, minutes=5)
    assert default_baseline([int8, base]) is base
    assert why_baseline(base) == "its recipe is the engine's defaults"


def test_else_the_fewest_changed_knobs_else_the_oldest():
    two = _run(1, {"dtype": "bfloat16", "drop_layers": 2}, minutes=0)
    one = _run(2, {"drop_layers": 2}, minutes=1)
    assert default_baseline([two, one]) is one and "fewest knobs (1)" in why_baseline(one)
    newer, older = _run(5, {"dtype": "bfloat16"}, minutes=9), _run(6, {"drop_layers": 1}, minutes=2)
    assert default_baseline([newer, older]) is older
    failed = _run(7, {}, minutes=0, status="failed")
    assert default_baseline([failed, newer]) is newer  # a failed run has nothing to compare against


def test_a_frame_names_every_row_and_never_says_none():
    frame = pd.DataFrame(
        {
            "run_id": [1, 2, 3],
            "engine": ["transformers"] * 3,
            "name": [None, "mine", float("nan")],
            "recipe.quantization": ["none", "none", "torchao_int8_weight_only"],
            "recipe.drop_layers": [0.0, 2.0, 0.0],  # a column with gaps reads as floats
        }
    )
    names = frame_run_names(frame)
    assert names == ["run 1 · engine defaults", "run 2 · mine · drop 2 layers", "run 3 · INT8 weight-only (torchao)"]
    assert not any("None" in n or "nan" in n for n in names)


def test_the_demo_model_label_is_shortened():
    assert (
        short_model("demo (SmolLM2-135M-Instruct, Q4_1 GGUF dequantized to float32)") == "demo (SmolLM2-135M-Instruct)"
    )
    assert short_model("org/name") == "org/name"
