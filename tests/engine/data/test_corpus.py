"""The default corpus's two parts: what accuracy is scored on and what GPTQ calibrates on
never meet (issue 13, item 3: GPTQ was calibrated on the very text it was scored on)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.data import corpus

NGRAM = 8  # tokens: no run this long of scored text may occur in the calibration text


def test_parts_are_disjoint_slices_of_the_default_corpus():
    full = corpus.default_corpus()
    evaluation, calibration = corpus.evaluation_part(), corpus.calibration_part()
    assert full[evaluation.start : evaluation.end] == evaluation.text  # a prefix of the corpus
    assert evaluation.end < calibration.start <= calibration.end == len(full)  # no overlap
    for paragraph in calibration.text.split("\n\n"):
        assert paragraph in full[calibration.start :]
        assert paragraph not in evaluation.text
    for paragraph in evaluation.text.split("\n\n"):
        assert paragraph not in calibration.text
    shared = corpus._sentences(evaluation.text.replace("\n\n", " ")) & corpus._sentences(
        calibration.text.replace("\n\n", " ")
    )
    assert not shared, sorted(shared)[:3]
    assert len(evaluation.text) > 30_000 and len(calibration.text) > 128_000  # room for both uses
    assert "evaluation part (chars 0-" in evaluation.describe()
    assert f"calibration part (chars {calibration.start:,}-" in calibration.describe()


def test_gptq_calibrates_only_on_the_calibration_part():
    from engine.backends.transformers import knobs
    from engine.backends.transformers.recipe import TransformersRecipe

    recipe = TransformersRecipe(quantization="gptq")
    texts = knobs.calibration_texts(recipe)
    evaluation = corpus.evaluation_part().text
    assert len(texts) == 64  # as many samples as before the split
    for piece in texts:
        assert piece in corpus.calibration_part().text
        assert piece[:200] not in evaluation and evaluation[:200] not in piece
    assert corpus.calibration_source(None) == corpus.calibration_part().describe()
    assert corpus.calibration_source("/data/calib.txt") == "/data/calib.txt"


class _RecordingBackend:
    """The demo tokenizer and a flat score: records every sequence the phase scores."""

    name = "recording"

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer, self.scored = tokenizer, []

    def tokenizer(self) -> Any:
        return self._tokenizer

    def info(self) -> dict[str, Any]:
        return {"engine": self.name}

    def score(self, sequences: list[list[int]], top_k: int = 0, full: bool = False) -> list[Any]:
        from engine.backends.base import TokenScores

        self.scored += [list(s) for s in sequences]
        return [TokenScores(token_logprobs=np.full(len(s) - 1, -2.0, dtype=np.float32)) for s in sequences]


def _ngrams(ids: list[int]) -> set[tuple[int, ...]]:
    return {tuple(ids[i : i + NGRAM]) for i in range(len(ids) - NGRAM + 1)}


@pytest.mark.parametrize("budget", [2048, 10_000_000])  # the default budget, and all the corpus gives
def test_no_scored_token_sequence_lies_in_the_calibration_text(demo_folder, budget: int):
    from transformers import AutoTokenizer

    from engine.accuracy import evaluate
    from engine.spec import parse_job_spec

    tokenizer = AutoTokenizer.from_pretrained(str(demo_folder))
    spec = parse_job_spec({"model": {"source": "demo"}, "quality": {"metrics": ["ppl"], "budget_tokens": budget}})
    backend = _RecordingBackend(tokenizer)
    result = evaluate.evaluate(spec, backend, None, [], log=lambda _m: None)
    assert result["corpus"].startswith("default corpus") and "evaluation part" in result["corpus"]
    assert backend.scored and result["perplexity_tokens"] > 0

    calibration = corpus.calibration_part().text
    calibration_ngrams = _ngrams(tokenizer.encode(calibration, add_special_tokens=False))
    for window in backend.scored:
        assert not (_ngrams(window) & calibration_ngrams), "a scored token sequence lies in the calibration text"
        text = tokenizer.decode(window)
        assert text[:120] not in calibration and text not in calibration
    # and the calibration samples GPTQ gets are made of calibration text only
    from engine.backends.transformers import knobs
    from engine.backends.transformers.recipe import TransformersRecipe

    samples = "\n".join(knobs.calibration_texts(TransformersRecipe(quantization="gptq")))
    sample_ngrams = _ngrams(tokenizer.encode(samples, add_special_tokens=False))
    assert not any(_ngrams(window) & sample_ngrams for window in backend.scored)
