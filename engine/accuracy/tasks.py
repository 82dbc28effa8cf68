"""Task accuracy through the loaded backend: local JSONL tasks (work offline) and
lm-evaluation-harness tasks where the harness and its data are available.

A local task is a ``.jsonl`` file, one example per line:

- multiple choice: ``{"prompt": "...", "choices": ["A", "B", ...], "answer": 1}``
  (``answer`` is the index of the right choice, or the choice text; ``question`` is
  accepted for ``prompt``). Each choice is scored by the log-likelihood of its tokens
  after the prompt (:meth:`Backend.score`); the most likely one is the model's answer.
- exact match: ``{"prompt": "...", "answer": "text"}`` (optional ``max_tokens``): the
  model continues the prompt greedily until a newline or ``max_tokens``; the first line
  of its answer, stripped, must equal the answer, stripped.

lm-evaluation-harness tasks are named as lm-eval names them (``hellaswag``), or given
as a local lm-eval task definition (``path/to/task.yaml``, e.g. with ``dataset_path: json``
so it works offline). They run through the same backend via an lm-eval ``LM`` adapter
(loglikelihood, loglikelihood_rolling, generate_until on :meth:`Backend.score`); a task
whose data cannot be reached is reported unavailable with the reason.

Accuracy is stored as ``task:<name>`` (name = the file's stem) with ``task:<name>:stderr``
(sample standard error of the mean, as lm-evaluation-harness reports it),
``task:<name>:n`` (examples scored), and for local tasks ``task:<name>:correct`` (one ``0``/``1``
per example, in order) with ``task:<name>:examples`` (a digest of the examples), so two runs that
scored the same examples get a paired difference.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from engine.accuracy import lm_eval
from engine.accuracy.lm_eval import Progress
from engine.accuracy.names import is_lm_eval_yaml, is_local, task_key
from engine.accuracy.scoring import AccuracyError, continuation_ids, encode, greedy_ids
from engine.backends.base import Backend, Tokenizer
from engine.jsonvalue import JSONObject, JSONValue
from engine.spec import SpecError

__all__ = ["check_task", "continuation_ids", "is_lm_eval_yaml", "is_local", "load_local_task", "run_task", "task_key"]


@dataclass(frozen=True)
class Example:
    prompt: str
    choices: tuple[str, ...] | None  # None: exact match
    answer: int | str
    max_tokens: int = 16


def load_local_task(path: str, limit: int | None = None) -> list[Example]:
    """Parse a JSONL task file; raises SpecError with the line that is wrong."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise SpecError(f"task file {path} does not exist")
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read task file {path}: {exc}") from exc
    examples: list[Example] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecError(f"task file {path} line {number} is not valid JSON: {exc.msg}") from exc
        examples.append(_example(obj, f"task file {path} line {number}"))
        if limit is not None and len(examples) >= limit:
            break
    if not examples:
        raise SpecError(f"task file {path} holds no examples")
    return examples


def _example(obj: JSONValue, where: str) -> Example:
    if not isinstance(obj, dict):
        raise SpecError(f"{where}: each line must be a JSON object")
    prompt = obj.get("prompt", obj.get("question"))
    if not isinstance(prompt, str) or not prompt:
        raise SpecError(f"{where}: needs a non-empty 'prompt' string")
    answer = obj.get("answer")
    choices = obj.get("choices")
    if choices is None:
        if not isinstance(answer, str) or not answer.strip():
            raise SpecError(f"{where}: an exact-match example needs an 'answer' string (or give 'choices')")
        max_tokens = obj.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or not 1 <= max_tokens <= 512:
            raise SpecError(f"{where}: max_tokens must be an integer from 1 to 512")
        return Example(prompt=prompt, choices=None, answer=answer, max_tokens=max_tokens)
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) and c for c in choices):
        raise SpecError(f"{where}: 'choices' must be a list of at least two non-empty strings")
    if isinstance(answer, str) and answer in choices:
        answer = choices.index(answer)
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(choices):
        raise SpecError(f"{where}: 'answer' must be the index of a choice (0..{len(choices) - 1}) or its text")
    return Example(prompt=prompt, choices=tuple(choices), answer=answer)


def check_task(name: str) -> None:
    """Pre-flight: a local file parses; an lm-eval task needs the harness installed."""
    if is_local(name):
        load_local_task(name, limit=None)
        return
    lm_eval.check(name)


def run_task(backend: Backend, name: str, limit: int | None, progress: Progress | None = None) -> JSONObject:
    """Accuracy of the loaded recipe on one task: ``{"task:<name>": acc, ...}``."""
    if not is_local(name):
        return lm_eval.run(name, backend, limit, progress)
    try:
        examples = load_local_task(name, limit)
    except SpecError as exc:
        raise AccuracyError(str(exc)) from exc
    tokenizer = backend.tokenizer()
    correct: list[float] = []
    report = progress or (lambda _d, _t, _n: None)
    for i, ex in enumerate(examples):
        if ex.choices is not None:
            correct.append(float(_choose(backend, tokenizer, ex) == ex.answer))
        else:
            correct.append(float(_normalize(_greedy_text(backend, tokenizer, ex)) == _normalize(str(ex.answer))))
        report(i + 1, len(examples), f"task {task_key(name)}: {i + 1}/{len(examples)}")
    key = f"task:{task_key(name)}"
    n = len(correct)
    acc = sum(correct) / n
    stderr = math.sqrt(sum((c - acc) ** 2 for c in correct) / (n - 1) / n) if n > 1 else None
    kind = "multiple choice" if examples[0].choices is not None else "exact match"
    return {
        key: acc,
        f"{key}:stderr": stderr,
        f"{key}:n": n,
        f"{key}:kind": kind,
        f"{key}:correct": "".join("1" if c else "0" for c in correct),  # per example, for paired differences
        f"{key}:examples": examples_digest(examples),
    }


def examples_digest(examples: list[Example]) -> str:
    """Which examples were scored, as a short digest: two runs with the same one can be paired per example."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps([ex.prompt, ex.choices, ex.answer, ex.max_tokens]).encode())
    return h.hexdigest()[:20]


def loglikelihood(backend: Backend, tokenizer: Tokenizer, context: str, continuations: list[str]) -> list[float]:
    """Sum of log-probabilities of each continuation's tokens after ``context``."""
    pairs = [continuation_ids(tokenizer, context, c) for c in continuations]
    seqs = [ctx + cont for ctx, cont in pairs]
    out = []
    for (ctx, cont), sc in zip(pairs, backend.score(seqs), strict=True):
        out.append(float(sc.token_logprobs[len(ctx) - 1 : len(ctx) - 1 + len(cont)].sum()))
    return out


def _choose(backend: Backend, tokenizer: Tokenizer, ex: Example) -> int:
    scores = loglikelihood(backend, tokenizer, ex.prompt, list(ex.choices or ()))
    return max(range(len(scores)), key=scores.__getitem__)


def _greedy_text(backend: Backend, tokenizer: Tokenizer, ex: Example) -> str:
    def stop(ids: list[int]) -> bool:
        return "\n" in tokenizer.decode(ids, skip_special_tokens=True).lstrip("\n")

    ids = greedy_ids(
        backend, encode(tokenizer, ex.prompt), ex.max_tokens, stop, getattr(tokenizer, "eos_token_id", None)
    )
    return tokenizer.decode(ids, skip_special_tokens=True)


def _normalize(text: str) -> str:
    lines = text.strip().splitlines()
    return " ".join(lines[0].split()) if lines else ""
