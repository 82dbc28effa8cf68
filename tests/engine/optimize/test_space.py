"""The search space: knobs valid for the device (from the rules), dependent knobs only with their
parent, pins and exclusions, trial specs validated by the spec itself."""

from __future__ import annotations

import pytest
from study_helpers import definition

from engine.optimize.space import build_space, check_searchable, trial_spec
from engine.spec import SpecError


class FakeTrial:
    """Suggests the given choice for each knob, else the first offered; records what was asked."""

    def __init__(self, picks: dict | None = None) -> None:
        self.picks, self.asked = picks or {}, []

    def suggest_categorical(self, name, choices):
        self.asked.append(name)
        return self.picks.get(name, choices[0])


def _space(**overrides):
    return build_space(definition(**overrides))


def test_values_the_cpu_cannot_run_are_left_out_with_the_rules_reason():
    space = _space(knobs=["dtype", "quantization", "attention"], values={})
    knobs = {k.name: k for k in space.knobs}
    assert "float16" not in knobs["dtype"].values and knobs["dtype"].values[0] == "auto"  # the base's first
    assert "bnb_nf4" not in knobs["quantization"].values and "torch_dynamic_int8" in knobs["quantization"].values
    assert "flash_attention_2" not in knobs["attn_implementation"].values  # 'attention' is its alias
    left = "\n".join(space.left_out())
    assert "dtype=float16: float16 is not supported on the CPU" in left
    assert "quantization=bnb_nf4: bnb_nf4 (bitsandbytes) needs a CUDA device" in left
    assert "speculative" not in left


def test_a_value_the_base_cannot_take_alone_is_left_out():
    space = _space(knobs=["speculative"], values={})
    [knob] = space.knobs
    assert knob.values == ("none", "prompt_lookup")
    assert any("assistant_model" in why for value, why in knob.left_out if value == "assistant")


def test_dependent_knobs_are_suggested_only_when_their_parent_is_set():
    space = _space(
        knobs=["quantization", "gptq_bits", "speculative", "num_speculative_tokens"],
        values={"quantization": ["none", "gptq"], "gptq_bits": [4, 8], "speculative": ["none", "prompt_lookup"]},
    )
    plain = FakeTrial()
    assert space.suggest(plain) == {"quantization": "none", "speculative": "none"}
    assert plain.asked == ["quantization", "speculative"]
    both = FakeTrial({"quantization": "gptq", "speculative": "prompt_lookup", "gptq_bits": 8})
    assert space.suggest(both) == {
        "quantization": "gptq",
        "speculative": "prompt_lookup",
        "gptq_bits": 8,
        "num_speculative_tokens": 10,  # the base value is offered first
    }
    grid = space.grid()
    # quantization (2) x speculative (2), gptq_bits x2 only under gptq, tokens x3 only under speculation
    assert len(grid) == (1 + 2) * (1 + 3)
    assert all("gptq_bits" not in p for p in grid if p["quantization"] == "none")
    assert grid[0] == space.base_params() == {"quantization": "none", "speculative": "none"}


def test_pins_and_exclusions():
    space = _space(
        knobs=["dtype", "quantization"],
        values={"quantization": ["none", "torch_dynamic_int8", "torchao_int8_weight_only"]},
        exclude={"quantization": ["torchao_int8_weight_only"]},
        pin={"attention": "eager"},
    )
    assert space.base_recipe["attn_implementation"] == "eager"
    assert {k.name: k.values for k in space.knobs}["quantization"] == ("none", "torch_dynamic_int8")
    with pytest.raises(SpecError, match="base recipe's quantization=none is excluded"):
        _space(exclude={"quantization": ["none"]})


def test_numbers_from_the_command_line_are_the_knobs_type():
    space = _space(knobs=["drop_layers"], values={"drop_layers": ["0", "2", "4"]})
    assert space.knobs[0].values == (0, 2, 4)
    with pytest.raises(SpecError, match="drop_layers='x' is not a value"):
        _space(knobs=["drop_layers"], values={"drop_layers": ["x"]})
    with pytest.raises(SpecError, match="open values"):
        _space(knobs=["sliding_window"], values={})


def test_a_combination_the_rules_refuse_is_a_spec_error_and_unused_knobs_go_back_to_defaults():
    d = definition()
    base = d.effective_base()
    with pytest.raises(SpecError, match="torch_dynamic_int8 quantizes float32 Linear layers"):
        trial_spec(base, {"dtype": "bfloat16", "quantization": "torch_dynamic_int8"})
    spec = trial_spec(base, {"dtype": "float32", "quantization": "torch_dynamic_int8"}, name="s1 · trial 2")
    assert spec.recipe.quantization == "torch_dynamic_int8" and spec.name == "s1 · trial 2"
    assert spec.quality.metrics == ("ppl",)  # the constraint's accuracy phase is on every trial
    assert (
        spec.fingerprint() == trial_spec(base, {"dtype": "float32", "quantization": "torch_dynamic_int8"}).fingerprint()
    )


def test_a_knob_with_one_value_left_cannot_be_searched():
    space = _space(knobs=["dtype"], values={"dtype": ["float16"]})
    with pytest.raises(SpecError, match="knob dtype has a single value on cpu .*float16 is not supported"):
        check_searchable(space, "cpu")
