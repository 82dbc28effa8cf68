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
(sample standard error of the mean, as lm-evaluation-harness reports it) and
``task:<name>:n`` (examples scored).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.spec import SpecError

Progress = Callable[[int, int, str], None]


def _quality_error(message: str) -> Exception:
    from engine.accuracy.evaluate import QualityError

    return QualityError(message)


def is_local(name: str) -> bool:
    """A task given as a JSONL file rather than an lm-eval task name."""
    return name.endswith(".jsonl")


def task_key(name: str) -> str:
    """The name used in the stored keys: the file's stem for local tasks."""
    return Path(name).stem if is_local(name) or is_lm_eval_yaml(name) else name


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


def _example(obj: Any, where: str) -> Example:
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
    if is_lm_eval_yaml(name) and not Path(name).expanduser().is_file():
        raise SpecError(f"task file {name} does not exist")
    try:
        import lm_eval  # noqa: F401
    except ImportError as exc:
        raise SpecError(
            f"task {name!r} is an lm-evaluation-harness task, and lm-eval is not installed here "
            "(its data also needs the Hugging Face hub); use a local task: task:path/to/file.jsonl"
        ) from exc


def run_task(backend: Any, name: str, limit: int | None, progress: Progress | None = None) -> dict[str, Any]:
    """Accuracy of the loaded recipe on one task: ``{"task:<name>": acc, ...}``."""
    if not is_local(name):
        return _run_lm_eval(name, backend, limit, progress)
    try:
        examples = load_local_task(name, limit)
    except SpecError as exc:
        raise _quality_error(str(exc)) from exc
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
    return {key: acc, f"{key}:stderr": stderr, f"{key}:n": n, f"{key}:kind": kind}


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def continuation_ids(tokenizer: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """Token ids of context and continuation, split where the joint tokenization allows."""
    ctx = _encode(tokenizer, context)
    whole = _encode(tokenizer, context + continuation)
    if whole[: len(ctx)] == ctx and len(whole) > len(ctx):
        return ctx, whole[len(ctx) :]
    return ctx, _encode(tokenizer, continuation)


def loglikelihood(backend: Any, tokenizer: Any, context: str, continuations: list[str]) -> list[float]:
    """Sum of log-probabilities of each continuation's tokens after ``context``."""
    pairs = [continuation_ids(tokenizer, context, c) for c in continuations]
    seqs = [ctx + cont for ctx, cont in pairs]
    out = []
    for (ctx, cont), sc in zip(pairs, backend.score(seqs), strict=True):
        out.append(float(sc.token_logprobs[len(ctx) - 1 : len(ctx) - 1 + len(cont)].sum()))
    return out


def _choose(backend: Any, tokenizer: Any, ex: Example) -> int:
    scores = loglikelihood(backend, tokenizer, ex.prompt, list(ex.choices or ()))
    return max(range(len(scores)), key=scores.__getitem__)


def _greedy_text(backend: Any, tokenizer: Any, ex: Example) -> str:
    def stop(ids: list[int]) -> bool:
        return "\n" in tokenizer.decode(ids, skip_special_tokens=True).lstrip("\n")

    ids = greedy_ids(
        backend, _encode(tokenizer, ex.prompt), ex.max_tokens, stop, getattr(tokenizer, "eos_token_id", None)
    )
    return tokenizer.decode(ids, skip_special_tokens=True)


def _normalize(text: str) -> str:
    lines = text.strip().splitlines()
    return " ".join(lines[0].split()) if lines else ""


def is_lm_eval_yaml(name: str) -> bool:
    """A task given as a local lm-evaluation-harness task definition (a YAML file)."""
    return name.endswith((".yaml", ".yml"))


def greedy_ids(
    backend: Any, prompt: list[int], max_tokens: int, stop: Callable[[list[int]], bool], eos: int | None
) -> list[int]:
    """Greedy continuation of ``prompt`` by repeated scoring, until EOS, ``stop`` or ``max_tokens``."""
    from engine.accuracy.evaluate import PLACEHOLDER_TOKEN

    seq = list(prompt)
    for _ in range(max_tokens):
        (sc,) = backend.score([seq + [PLACEHOLDER_TOKEN]], top_k=1)  # last row: after the whole sequence
        if sc.top_ids is None:
            raise _quality_error("this engine returns no top tokens, so greedy answers are unavailable")
        token = int(sc.top_ids[-1, 0])
        if token == eos:
            break
        seq.append(token)
        if stop(seq[len(prompt) :]):
            break
    return seq[len(prompt) :]


def _engine_lm(backend: Any, progress: Progress | None) -> Any:
    """An lm-evaluation-harness ``LM`` whose every request goes through ``backend.score``."""
    import numpy as np
    from lm_eval.api.model import LM

    tokenizer = backend.tokenizer()
    eos = getattr(tokenizer, "eos_token_id", None)
    prefix = [eos if eos is not None else 0]  # the context of an empty context

    class EngineLM(LM):
        def _tick(self, i: int, n: int, what: str) -> None:
            if progress is not None:
                progress(i + 1, n, what)

        def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
            out = []
            for i, req in enumerate(requests):
                context, continuation = req.args
                ctx, cont = continuation_ids(tokenizer, context, continuation)
                ctx = ctx or prefix
                (sc,) = backend.score([ctx + cont], top_k=1)
                rows = slice(len(ctx) - 1, len(ctx) - 1 + len(cont))
                greedy = sc.top_ids is not None and bool(np.all(sc.top_ids[rows, 0] == np.asarray(cont)))
                out.append((float(sc.token_logprobs[rows].sum()), greedy))
                self._tick(i, len(requests), "lm-eval loglikelihood")
            return out

        def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
            from engine.accuracy.evaluate import make_windows

            out = []
            for i, req in enumerate(requests):
                ids = prefix + _encode(tokenizer, req.args[0])
                total = 0.0
                for w in make_windows(ids, 1024, 1024 - 1):
                    (sc,) = backend.score([w.tokens])
                    total += float(sc.token_logprobs[w.skip :].sum())
                out.append(total)
                self._tick(i, len(requests), "lm-eval rolling loglikelihood")
            return out

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            out = []
            for i, req in enumerate(requests):
                context, kwargs = req.args
                until = kwargs.get("until") or []
                until = [until] if isinstance(until, str) else list(until)
                max_tokens = int(kwargs.get("max_gen_toks", 256))

                def stop(ids: list[int], until: list[str] = until) -> bool:
                    text = tokenizer.decode(ids, skip_special_tokens=True)
                    return any(u and u in text for u in until)

                ids = greedy_ids(backend, _encode(tokenizer, context) or prefix, max_tokens, stop, eos)
                text = tokenizer.decode(ids, skip_special_tokens=True)
                for u in until:
                    if u:
                        text = text.split(u)[0]
                out.append(text)
                self._tick(i, len(requests), "lm-eval generation")
            return out

    return EngineLM()


_PRIMARY_METRICS = ("acc", "exact_match", "acc_norm", "f1", "mcc", "bleu", "word_perplexity")


def _run_lm_eval(
    name: str, backend: Any = None, limit: int | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """One lm-evaluation-harness task through the engine; data it cannot reach is a QualityError."""
    try:
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager
    except ImportError as exc:
        raise _quality_error(
            f"lm-evaluation-harness is not installed here, so task {name!r} is unavailable; use a local JSONL task"
        ) from exc
    task_name, include = name, None
    if is_lm_eval_yaml(name):
        path = Path(name).expanduser().resolve()
        include = str(path.parent)
        task_name = _yaml_task_name(path)
    try:
        manager = TaskManager(include_path=include, verbosity="ERROR")
        results = simple_evaluate(
            model=_engine_lm(backend, progress),
            tasks=[task_name],
            limit=limit,
            task_manager=manager,
            log_samples=False,
            bootstrap_iters=1000,
        )
    except KeyError as exc:
        raise _quality_error(f"task {name!r} is unavailable: lm-evaluation-harness has no task {exc}") from exc
    except Exception as exc:  # hub unreachable, dataset missing, bad task definition: one reason
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise _quality_error(f"task {name!r} is unavailable: {reason}") from exc
    if not results or task_name not in results.get("results", {}):
        raise _quality_error(f"task {name!r} produced no results")
    scores = results["results"][task_name]
    metric = next((f"{m},none" for m in _PRIMARY_METRICS if f"{m},none" in scores), None)
    if metric is None:
        metric = next(
            (k for k in scores if k != "alias" and "_stderr" not in k and isinstance(scores[k], (int, float))), None
        )
    if metric is None:
        raise _quality_error(f"task {name!r} reported no numeric metric")
    base, _, flt = metric.partition(",")
    stderr = scores.get(f"{base}_stderr,{flt}")
    key = f"task:{task_key(name)}"
    n = (results.get("n-samples") or {}).get(task_name, {}).get("effective")
    return {
        key: float(scores[metric]),
        f"{key}:stderr": stderr if isinstance(stderr, (int, float)) else None,
        f"{key}:n": n,
        f"{key}:kind": f"lm-eval {metric}",
    }


def _yaml_task_name(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("task:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise _quality_error(f"{path} has no top-level 'task:' name")
