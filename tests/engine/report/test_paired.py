"""Paired accuracy intervals between runs scored on the same text or examples (issue 26, item 3).

Two runs scored on the same evaluation text read "no significant change in perplexity (+0.3 % ± 19 %)":
each run's standard error was combined as if independent, although both scored the same tokens.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from engine.accuracy import evaluate as accuracy
from engine.backends.base import TokenScores
from engine.report.compare import compare_runs
from engine.report.paired import PAIRED_NOTE, UNPAIRED_NOTE, accuracy_note, perplexity_ratio, task_difference
from engine.report.summary import summarize_against
from engine.report.verdicts import accuracy_verdict
from engine.spec import parse_job_spec


class _Tokenizer:
    eos_token_id = 0

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) % 128 for c in text]


class _Bigram:
    """A bigram model over bytes; ``damage`` perturbs its logits a little (a recipe that costs ~0.3 %)."""

    name = "fake"

    def __init__(self, damage: float = 0.0, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        logits = rng.normal(scale=2.0, size=(128, 128)) + damage * rng.normal(size=(128, 128))
        self.logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))

    def tokenizer(self) -> _Tokenizer:
        return _Tokenizer()

    def info(self) -> dict:
        return {"engine": "fake"}

    def score(self, sequences, top_k=0, full=False):
        out = []
        for seq in sequences:
            rows = self.logp[np.asarray(seq[:-1])]
            lps = rows[np.arange(len(seq) - 1), np.asarray(seq[1:])].astype(np.float32)
            out.append(TokenScores(token_logprobs=lps))
        return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """The quality records of a base recipe and a slightly damaged one, both scored on the same text."""
    words = np.random.default_rng(3).choice(["latency", "lab", "token", "decode", "the", "of", "fast"], size=900)
    corpus = tmp_path_factory.mktemp("paired") / "corpus.txt"
    corpus.write_text(" ".join(words), encoding="utf-8")
    spec = parse_job_spec(
        {"model": {"source": "demo"}, "quality": {"metrics": ["ppl"], "corpus": str(corpus), "budget_tokens": 4096}}
    )
    base = accuracy.evaluate(spec, _Bigram(), None, [], log=lambda _m: None)
    new = accuracy.evaluate(spec, _Bigram(damage=0.05), None, [], log=lambda _m: None)
    return base, new


def test_each_run_keeps_its_per_block_nll_and_what_text_it_scored(scored):
    base, new = scored
    blocks = base["perplexity_blocks"]
    assert blocks["block_tokens"] == 64 and sum(blocks["tokens"]) == base["perplexity_tokens"]
    assert np.exp(sum(blocks["nll"]) / sum(blocks["tokens"])) == pytest.approx(base["perplexity"], rel=1e-6)
    assert blocks["text"] == new["perplexity_blocks"]["text"]  # the same text: they pair


def test_the_paired_interval_is_many_times_narrower_than_two_errors_added(scored):
    base, new = scored
    paired = accuracy_verdict("quality.perplexity", base["perplexity"], new["perplexity"], base, new)
    assert paired.paired is True and paired.interval is not None
    unpaired_base = {k: v for k, v in base.items() if k != "perplexity_blocks"}  # as runs stored before
    unpaired = accuracy_verdict("quality.perplexity", base["perplexity"], new["perplexity"], unpaired_base, new)
    assert unpaired.paired is False and unpaired.stderr is not None
    paired_half = (paired.interval.hi - paired.interval.lo) / 2 * base["perplexity"]
    assert paired_half * 5 < 2 * unpaired.stderr, (paired_half, unpaired.stderr)
    assert paired.interval.lo <= new["perplexity"] / base["perplexity"] <= paired.interval.hi
    assert paired.significant and unpaired.state == "unclear"  # a 0.9 % change: unpaired, not enough data


def test_the_summary_gives_the_paired_margin_and_the_footnote_says_which_kind(scored):
    base, new = scored
    spec = {"model": {"source": "demo"}, "recipe": {"engine": "transformers"}}

    def run(run_id: int, quality: dict, minutes: int) -> SimpleNamespace:
        from datetime import UTC, datetime, timedelta

        recipe = {"engine": "transformers", **({"dtype": "bfloat16"} if run_id == 2 else {})}
        return SimpleNamespace(
            id=run_id, name=None, status="done", error=None, model="demo", engine="transformers", device="cpu",
            device_name="cpu", spec={**spec, "recipe": recipe}, metrics={}, quality=quality,
            created_at=datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=minutes),
        )  # fmt: skip

    a, b = run(1, base, 0), run(2, new, 1)
    text = summarize_against(b, a)
    assert re.search(r"perplexity 0\.\d+ % (better|worse) \(significant, 95 % CI [\d.]+–[\d.]+ %\)", text), text
    upper = float(text.split("perplexity ")[1].split("95 % CI ")[1].split("–")[1].split(" %")[0])
    assert upper < 2.0, text  # unpaired the interval spans tens of percent
    comparison = compare_runs([a, b])
    assert accuracy_note(comparison.verdicts) == PAIRED_NOTE
    older = run(1, {k: v for k, v in base.items() if k != "perplexity_blocks"}, 0)
    assert accuracy_note(compare_runs([older, b]).verdicts) == UNPAIRED_NOTE


def test_runs_that_scored_other_text_are_not_paired(scored):
    base, new = scored
    other = dict(new, perplexity_blocks={**new["perplexity_blocks"], "text": "another corpus"})
    assert perplexity_ratio(base, other) is None
    assert perplexity_ratio(base, {**new, "perplexity_blocks": {**new["perplexity_blocks"], "tokens": [1]}}) is None
    assert perplexity_ratio(None, new) is None


def test_task_accuracy_is_paired_per_example_on_the_same_examples():
    rng = np.random.default_rng(0)
    base_marks = rng.random(200) < 0.6
    new_marks = base_marks.copy()
    new_marks[:6] = ~new_marks[:6]  # six answers changed out of 200
    q = {"task:t:examples": "abc", "task:t:stderr": 0.035, "task:t:n": 200, "task:t:kind": "multiple choice"}
    base = {**q, "task:t": base_marks.mean(), "task:t:correct": "".join("1" if m else "0" for m in base_marks)}
    new = {**q, "task:t": new_marks.mean(), "task:t:correct": "".join("1" if m else "0" for m in new_marks)}
    mean, se = task_difference("task:t", base, new)
    assert mean == pytest.approx(new_marks.mean() - base_marks.mean())
    assert se < 0.035 / 2  # the unpaired error of the difference is 0.035 * sqrt(2)
    verdict = accuracy_verdict("quality.task:t", base["task:t"], new["task:t"], base, new)
    assert verdict.paired is True and verdict.stderr == pytest.approx(se)
    assert task_difference("task:t", base, {**new, "task:t:examples": "other"}) is None
