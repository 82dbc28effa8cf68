"""Local JSONL tasks: parsing, multiple choice by log-likelihood, exact match by greedy
decoding (with a scripted backend), and a small generated task on the demo model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.accuracy import tasks
from engine.accuracy.scoring import AccuracyError
from engine.backends.base import TokenScores
from engine.spec import SpecError


def write_task(path: Path, examples: list[dict]) -> str:
    path.write_text("".join(json.dumps(e) + "\n" for e in examples), encoding="utf-8")
    return str(path)


def counting_task(n: int = 12) -> list[dict]:
    """A generated multiple-choice task: continue a counting sequence."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        start = int(rng.integers(1, 50))
        seq = ", ".join(str(start + k) for k in range(5))
        right = start + 5
        wrong = [right + 7, right - 3]
        choices = [f" {right}", f" {wrong[0]}", f" {wrong[1]}"]
        order = rng.permutation(3).tolist()
        out.append(
            {"prompt": f"Count on: {seq},", "choices": [choices[j] for j in order], "answer": order.index(0), "id": i}
        )
    return out


class CharTokenizer:
    """One token per character (ids = code points), enough for a scripted backend."""

    eos_token_id = 0

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids if i)


class ScriptedBackend:
    """Prefers the characters of ``favourite`` (as continuation) and then a newline."""

    def __init__(self, favourite: str) -> None:
        self.favourite = favourite
        self._tok = CharTokenizer()

    def tokenizer(self) -> CharTokenizer:
        return self._tok

    def score(self, sequences, top_k=0, full=False):
        out = []
        for seq in sequences:
            n = len(seq) - 1
            token_lp = np.array([-0.1 if chr(t) in self.favourite else -5.0 for t in seq[1:]], dtype=np.float32)
            top = np.zeros((n, 1), dtype=np.int64)
            text = self._tok.decode(seq)
            for i in range(n):  # next token: the favourite's next character after the prompt's '='
                prefix = text[: i + 1]
                done = prefix.split("=")[-1] if "=" in prefix else None
                if done is None:
                    top[i, 0] = ord(" ")
                elif len(done) < len(self.favourite):
                    top[i, 0] = ord(self.favourite[len(done)])
                else:
                    top[i, 0] = ord("\n")
            out.append(
                TokenScores(
                    token_logprobs=token_lp,
                    top_ids=top if top_k else None,
                    top_logprobs=np.zeros((n, 1), np.float32) if top_k else None,
                )
            )
        return out


def test_parse_errors_name_the_line(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "choices": ["x", "y"], "answer": 0}\nnot json\n', encoding="utf-8")
    with pytest.raises(SpecError, match="line 2 is not valid JSON"):
        tasks.load_local_task(str(bad))
    wrong = write_task(tmp_path / "wrong.jsonl", [{"prompt": "a", "choices": ["x", "y"], "answer": 5}])
    with pytest.raises(SpecError, match="line 1: 'answer' must be the index"):
        tasks.load_local_task(wrong)
    with pytest.raises(SpecError, match="does not exist"):
        tasks.check_task(str(tmp_path / "none.jsonl"))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(SpecError, match="holds no examples"):
        tasks.load_local_task(str(empty))


def test_answer_may_be_the_choice_text_and_limit_applies(tmp_path: Path):
    path = write_task(tmp_path / "t.jsonl", [{"question": "q", "choices": ["a", "b"], "answer": "b"}] * 5)
    examples = tasks.load_local_task(path, limit=3)
    assert len(examples) == 3 and examples[0].answer == 1 and examples[0].prompt == "q"


def test_multiple_choice_picks_the_most_likely_continuation(tmp_path: Path):
    path = write_task(
        tmp_path / "mc.jsonl",
        [
            {"prompt": "Q=", "choices": ["xyz", "abc"], "answer": 1},  # favourite letters: right
            {"prompt": "Q=", "choices": ["abc", "xyz"], "answer": 1},  # wrong
            {"prompt": "Q=", "choices": ["zz", "ab", "yy"], "answer": 1},  # right
        ],
    )
    result = tasks.run_task(ScriptedBackend("abc"), path, None)
    assert result["task:mc"] == pytest.approx(2 / 3)
    assert result["task:mc:n"] == 3 and result["task:mc:kind"] == "multiple choice"
    # sample standard error of the mean, as lm-evaluation-harness reports it
    expected = math.sqrt(np.var([1, 0, 1], ddof=1) / 3)
    assert result["task:mc:stderr"] == pytest.approx(expected)


def test_exact_match_decodes_greedily_until_a_newline(tmp_path: Path):
    path = write_task(
        tmp_path / "em.jsonl",
        [
            {"prompt": "2+3=", "answer": "42"},
            {"prompt": "6*7=", "answer": " 42 "},  # compared stripped
            {"prompt": "1+1=", "answer": "2", "max_tokens": 4},
        ],
    )
    result = tasks.run_task(ScriptedBackend("42"), path, None)
    assert result["task:em"] == pytest.approx(2 / 3) and result["task:em:kind"] == "exact match"


def test_lm_eval_tasks_say_why_they_are_unavailable(monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("lm_eval")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    tasks.check_task("hellaswag")  # the harness is installed: pre-flight lets the name through
    backend = ScriptedBackend("abc")
    with pytest.raises(AccuracyError, match="no task"):
        tasks.run_task(backend, "no_such_task_xyz", 2)
    with pytest.raises(AccuracyError, match="hellaswag.*unavailable"):  # its data lives on the hub
        tasks.run_task(backend, "hellaswag", 2)


def lm_eval_yaml(tmp_path: Path) -> str:
    """A generated lm-eval task definition over a generated local JSON file (works offline)."""
    data = tmp_path / "count_on.jsonl"
    data.write_text(
        "".join(
            json.dumps({"q": e["prompt"], "choices": e["choices"], "label": e["answer"]}) + "\n"
            for e in counting_task(8)
        ),
        encoding="utf-8",
    )
    yaml = tmp_path / "count_on.yaml"
    yaml.write_text(
        "task: latencylab_count_on\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data}\ntest_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: "{{q}}"\ndoc_to_choice: "{{choices}}"\ndoc_to_target: label\n'
        "metric_list:\n  - metric: acc\n",
        encoding="utf-8",
    )
    return str(yaml)


@pytest.mark.slow
def test_generated_counting_task_on_the_demo_model(tmp_path: Path, demo_folder):
    from engine.backends.base import get_backend
    from engine.backends.transformers.recipe import TransformersRecipe
    from engine.spec import ModelSpec
    from engine.weights import models

    path = write_task(tmp_path / "counting.jsonl", counting_task())
    backend = get_backend("transformers")
    backend.load(models.resolve(ModelSpec(source="demo")), TransformersRecipe(), "cpu", lambda _m, _f: None)
    try:
        result = tasks.run_task(backend, path, None)
    finally:
        backend.unload()
    assert result["task:counting:n"] == 12
    assert result["task:counting"] >= 0.75  # chance is 1/3; counting on is easy even for 135M parameters


@pytest.mark.slow
def test_lm_eval_yaml_task_runs_through_the_engine(tmp_path: Path, demo_folder, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("lm_eval")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from engine.backends.base import get_backend
    from engine.backends.transformers.recipe import TransformersRecipe
    from engine.spec import ModelSpec
    from engine.weights import models

    path = lm_eval_yaml(tmp_path)
    backend = get_backend("transformers")
    backend.load(models.resolve(ModelSpec(source="demo")), TransformersRecipe(), "cpu", lambda _m, _f: None)
    try:
        result = tasks.run_task(backend, path, None)
        local = tasks.run_task(backend, write_task(tmp_path / "same.jsonl", counting_task(8)), None)
    finally:
        backend.unload()
    assert result["task:count_on:n"] == 8 and result["task:count_on:kind"] == "lm-eval acc,none"
    assert result["task:count_on"] == local["task:same"]  # the harness and our scorer agree on the same data
