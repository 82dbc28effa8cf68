"""lm-evaluation-harness tasks through the loaded backend.

A task is named as lm-eval names it (``hellaswag``) or given as a local lm-eval task
definition (``path/to/task.yaml``, e.g. with ``dataset_path: json`` so it works offline).
It runs through the same backend via an lm-eval ``LM`` adapter (loglikelihood,
loglikelihood_rolling, generate_until on :meth:`Backend.score`); a task whose data cannot
be reached is reported unavailable with the reason (a :class:`AccuracyError`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.accuracy.names import is_lm_eval_yaml, task_key
from engine.accuracy.scoring import AccuracyError, continuation_ids, encode, greedy_ids, make_windows
from engine.backends.base import Backend
from engine.jsonvalue import JSONMapping, JSONObject
from engine.spec import SpecError

if TYPE_CHECKING:
    from lm_eval.api.instance import Instance
    from lm_eval.api.model import LM

Progress = Callable[[int, int, str], None]

_PRIMARY_METRICS = ("acc", "exact_match", "acc_norm", "f1", "mcc", "bleu", "word_perplexity")
ROLLING_WINDOW = 1024  # tokens per window of loglikelihood_rolling


def check(name: str) -> None:
    """Pre-flight: a YAML definition exists and the harness is installed."""
    if is_lm_eval_yaml(name) and not Path(name).expanduser().is_file():
        raise SpecError(f"task file {name} does not exist")
    try:
        import lm_eval  # noqa: F401
    except ImportError as exc:
        raise SpecError(
            f"task {name!r} is an lm-evaluation-harness task, and lm-eval is not installed here "
            "(its data also needs the Hugging Face hub); use a local task: task:path/to/file.jsonl"
        ) from exc


class _Requests:
    """The three request kinds of lm-eval's ``LM``, answered with ``backend.score``."""

    def __init__(self, backend: Backend, progress: Progress | None) -> None:
        self.backend, self.progress = backend, progress
        self.tokenizer = backend.tokenizer()
        self.eos = getattr(self.tokenizer, "eos_token_id", None)
        self.prefix = [self.eos if self.eos is not None else 0]  # the context of an empty context

    def tick(self, i: int, n: int, what: str) -> None:
        if self.progress is not None:
            self.progress(i + 1, n, what)

    def loglikelihood(self, context: str, continuation: str) -> tuple[float, bool]:
        ctx, cont = continuation_ids(self.tokenizer, context, continuation)
        ctx = ctx or self.prefix
        (sc,) = self.backend.score([ctx + cont], top_k=1)
        rows = slice(len(ctx) - 1, len(ctx) - 1 + len(cont))
        greedy = sc.top_ids is not None and bool(np.all(sc.top_ids[rows, 0] == np.asarray(cont)))
        return float(sc.token_logprobs[rows].sum()), greedy

    def rolling(self, text: str) -> float:
        ids = self.prefix + encode(self.tokenizer, text)
        total = 0.0
        for w in make_windows(ids, ROLLING_WINDOW, ROLLING_WINDOW - 1):
            (sc,) = self.backend.score([w.tokens])
            total += float(sc.token_logprobs[w.skip :].sum())
        return total

    def generate(self, context: str, kwargs: JSONMapping) -> str:
        until = kwargs.get("until") or []
        until = [until] if isinstance(until, str) else list(until)
        max_tokens = int(kwargs.get("max_gen_toks", 256))

        def stop(ids: list[int]) -> bool:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            return any(u and u in text for u in until)

        ids = greedy_ids(self.backend, encode(self.tokenizer, context) or self.prefix, max_tokens, stop, self.eos)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        for u in until:
            if u:
                text = text.split(u)[0]
        return text


def engine_lm(backend: Backend, progress: Progress | None) -> LM:
    """An lm-evaluation-harness ``LM`` whose every request goes through ``backend.score``."""
    from lm_eval.api.model import LM

    answer = _Requests(backend, progress)

    class EngineLM(LM):
        def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
            out = []
            for i, req in enumerate(requests):
                out.append(answer.loglikelihood(*req.args))
                answer.tick(i, len(requests), "lm-eval loglikelihood")
            return out

        def loglikelihood_rolling(self, requests: list[Instance], disable_tqdm: bool = False) -> list[float]:
            out = []
            for i, req in enumerate(requests):
                out.append(answer.rolling(req.args[0]))
                answer.tick(i, len(requests), "lm-eval rolling loglikelihood")
            return out

        def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
            out = []
            for i, req in enumerate(requests):
                out.append(answer.generate(*req.args))
                answer.tick(i, len(requests), "lm-eval generation")
            return out

    return EngineLM()


def run(
    name: str, backend: Backend | None = None, limit: int | None = None, progress: Progress | None = None
) -> JSONObject:
    """One lm-evaluation-harness task through the engine; data it cannot reach is a AccuracyError."""
    try:
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager
    except ImportError as exc:
        raise AccuracyError(
            f"lm-evaluation-harness is not installed here, so task {name!r} is unavailable; use a local JSONL task"
        ) from exc
    task_name, include = name, None
    if is_lm_eval_yaml(name):
        path = Path(name).expanduser().resolve()
        include = str(path.parent)
        task_name = yaml_task_name(path)
    try:
        manager = TaskManager(include_path=include, verbosity="ERROR")
        results = simple_evaluate(
            model=engine_lm(backend, progress),
            tasks=[task_name],
            limit=limit,
            task_manager=manager,
            log_samples=False,
            bootstrap_iters=1000,
        )
    except KeyError as exc:
        raise AccuracyError(f"task {name!r} is unavailable: lm-evaluation-harness has no task {exc}") from exc
    except Exception as exc:  # hub unreachable, dataset missing, bad task definition: one reason
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise AccuracyError(f"task {name!r} is unavailable: {reason}") from exc
    if not results or task_name not in results.get("results", {}):
        raise AccuracyError(f"task {name!r} produced no results")
    n = (results.get("n-samples") or {}).get(task_name, {}).get("effective")
    return _figures(name, results["results"][task_name], n)


def _figures(name: str, scores: JSONMapping, n: int | None) -> JSONObject:
    """The task's primary metric, its stderr, examples and kind, under ``task:<name>``."""
    metric = next((f"{m},none" for m in _PRIMARY_METRICS if f"{m},none" in scores), None)
    if metric is None:
        metric = next(
            (k for k in scores if k != "alias" and "_stderr" not in k and isinstance(scores[k], (int, float))), None
        )
    if metric is None:
        raise AccuracyError(f"task {name!r} reported no numeric metric")
    base, _, flt = metric.partition(",")
    stderr = scores.get(f"{base}_stderr,{flt}")
    key = f"task:{task_key(name)}"
    return {
        key: float(scores[metric]),
        f"{key}:stderr": stderr if isinstance(stderr, (int, float)) else None,
        f"{key}:n": n,
        f"{key}:kind": f"lm-eval {metric}",
    }


def yaml_task_name(path: Path) -> str:
    """The top-level ``task:`` name of a local lm-eval task definition."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("task:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise AccuracyError(f"{path} has no top-level 'task:' name")
