"""The model part of a spec: how the demo is named (issue 13, item 17)."""

from __future__ import annotations

from engine.spec import ModelSpec


def test_the_demo_label_says_its_weights_are_a_dequantized_q4_1_gguf():
    label = ModelSpec(source="demo").label
    assert label == "demo (SmolLM2-135M-Instruct, Q4_1 GGUF dequantized to float32)"
    assert ModelSpec(source="hf:org/name").label == "org/name"
