"""Accuracy of the same recipe on the same engine: perplexity, fidelity, task accuracy.

Every figure is computed through the loaded backend's :meth:`Backend.score` (and the
same recipe and device as the latency measurement), in the job's *evaluating* phase.
The pieces: :mod:`.sources` (the corpus text), :mod:`.scoring` (windows, KL, greedy
decoding), :mod:`.baseline` (the reference's cached numbers), :mod:`.recipe_pass`
(the recipe's pass over the windows), :mod:`.tasks` and :mod:`.lm_eval` (task accuracy).

Definitions
-----------
- **Corpus windows**: the corpus is tokenized (no special tokens), cut to
  ``budget_tokens`` tokens and scored in windows of ``window`` tokens (clamped to the
  model's context) starting every ``stride`` tokens; each target token is scored once,
  with the longest context its window gives (the first token of the corpus, and of each
  window when ``stride == window``, is never a target). The ``default`` corpus means its
  *evaluation part* only (:func:`engine.data.corpus.evaluation_part`); GPTQ calibrates on
  its disjoint calibration part, and a GPTQ run records its calibration text as ``calibration``.
- **Quantized KV cache** recipes get no accuracy figures: every figure here is scored with
  full forward passes, which never use the quantized cache (see ``KV_CACHE_NOT_MEASURED``).
- **Perplexity** = exp(mean negative log-likelihood of the scored tokens);
  ``perplexity_stderr`` by the delta method from the NLL's standard error (tokens are
  treated as independent, so it is optimistic). ``perplexity_blocks`` keeps the NLL summed over
  blocks of 64 consecutive scored tokens (never across a window) with a digest of the scored
  tokens: two runs with the same digest scored the same text, and Compare pairs them (a block
  bootstrap of the difference, :func:`engine.measure.stats.paired_block_ratio_ci`).
- **Reference recipe** (``reference`` in the quality dict, in words): the same engine's
  recipe with every knob at its default
  (``type(recipe)()``: transformers, dtype ``auto`` = the model's native precision on that
  device class, i.e. float32 on the CPU, bfloat16/float16 on CUDA; default attention), on
  the same device, same model and same corpus windows. For the demo model that is the
  Q4_1 GGUF its package ships, dequantized to float32, not the original checkpoint.
- **KL** = KL(reference || recipe) per scored position, in nats; the reference keeps its
  top-``BASELINE_TOP_K`` tokens and one bucket for the rest of its mass, so the figure is a
  lower bound of the full KL that is exact up to that tail. ``kl_mean`` and ``kl_p99``
  (numpy linear percentile) are over positions. It needs the recipe's full distribution.
- **Top-1 agreement**: share of positions where the recipe's most likely token equals the
  reference's.
- **Greedy flip rate**: the reference greedily continues the workload's first
  ``flip_prompts`` prompts (their last ``window`` tokens) by ``flip_tokens`` tokens; the
  recipe is then fed the same text and a flip is a position where its greedy choice differs
  from the reference's token (teacher forced, so one flip does not cascade).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

from engine.accuracy import baseline as baselines
from engine.accuracy import recipe_pass, tasks
from engine.accuracy.baseline import reference_recipe
from engine.accuracy.context import Log, PhaseContext, Progress
from engine.accuracy.scoring import BASELINE_TOP_K, AccuracyError, make_windows
from engine.accuracy.sources import check_corpus, corpus_text, same_file
from engine.backends.base import Backend, BackendError
from engine.data.corpus import calibration_source
from engine.jsonvalue import JSONMapping, JSONObject
from engine.spec import JobSpec, SpecError

if TYPE_CHECKING:
    from engine.accuracy.context import PhaseState
    from engine.weights.models import ResolvedModel

__all__ = [
    "BASELINE_TOP_K",
    "AccuracyError",
    "check",
    "dumps",
    "evaluate",
    "reference_label",
    "reference_recipe",
    "summary_line",
]

KV_CACHE_NOT_MEASURED = (
    "not measured: the quantized KV cache acts only during generation, and every accuracy "
    "figure (perplexity, KL, top-1, flips, tasks) is scored with full forward passes; "
    "these figures would be those of the unquantized cache"
)
_PPL_KEYS = ("perplexity", "perplexity_tokens", "perplexity_stderr", "nll_mean", "nll_stderr", "perplexity_blocks")


def check(spec: JobSpec) -> None:
    """Checks before anything loads: corpus and task files exist, packages are there."""
    q = spec.quality
    if not q.enabled:
        return
    if not spec.model.has_accuracy:  # also refused by the spec itself
        raise SpecError("synthetic weights have no accuracy: drop the quality metrics or use a real model")
    if "ppl" in q.metrics or "fidelity" in q.metrics:
        check_corpus(q.corpus)
    for name in q.tasks:
        tasks.check_task(name)


def evaluate(
    spec: JobSpec,
    backend: Backend,
    resolved: ResolvedModel | None,
    prompts: list[list[int]],
    state: PhaseState | None = None,
    log: Log = print,
    context_length: int | None = None,
    load_reference: Callable[[], Backend] | None = None,
) -> JSONObject:
    """Run the accuracy phase with an already loaded ``backend``; returns the quality dict.

    ``prompts`` are the workload's measured prompts (for greedy flips). ``load_reference``
    loads a backend with the reference recipe when the baseline is not cached and the
    recipe is not the reference itself (the runner passes one; tests may too).
    Figures that cannot be computed are left out and explained under ``notes``.
    """
    if not spec.model.has_accuracy or backend.tokenizer() is None:
        return {"notes": {"accuracy": "no accuracy: synthetic (random) weights"}}
    if not callable(getattr(backend, "score", None)):
        return {"notes": {"accuracy": f"the {getattr(backend, 'name', '?')} engine cannot score text yet"}}
    if getattr(spec.recipe, "kv_cache_quantization", "none") != "none":
        return {"notes": {"accuracy": KV_CACHE_NOT_MEASURED}, "timings_s": {}}
    ctx = PhaseContext(spec, backend, resolved, prompts, Progress(state), log, context_length, load_reference)
    q = spec.quality
    result: JSONObject = {"reference": reference_label(spec)} if "fidelity" in q.metrics else {}
    timings: dict[str, float] = {}
    if "ppl" in q.metrics or "fidelity" in q.metrics:
        t0 = time.perf_counter()
        try:
            result.update(_corpus_figures(ctx))
        except (AccuracyError, BackendError) as exc:  # the latency numbers are kept either way
            ctx.notes["corpus"] = str(exc)
        timings["corpus_s"] = time.perf_counter() - t0
    result.update(_calibration(ctx))
    result.update(_task_figures(ctx, timings))
    result["timings_s"] = timings
    if ctx.notes:
        result["notes"] = ctx.notes
    return result


def reference_label(spec: JobSpec) -> str:
    """What the fidelity figures are measured against, in words."""
    if spec.model.kind == "demo":
        return "default recipe of this engine (for the demo: the Q4_1 GGUF dequantized to float32)"
    if spec.model.kind == "gguf":
        return "default recipe of this engine (the GGUF file dequantized to float32)"
    return "default recipe of this engine (every knob at its default: the model's native precision)"


def _calibration(ctx: PhaseContext) -> JSONObject:
    """Which text a GPTQ recipe was calibrated on; a note where that is the scored corpus."""
    recipe, corpus = ctx.spec.recipe, ctx.spec.quality.corpus
    if getattr(recipe, "quantization", None) != "gptq":
        return {}
    file = recipe.gptq_calibration_file
    if same_file(corpus, file):
        ctx.notes["calibration"] = (
            "GPTQ was calibrated on this corpus file, so its perplexity and KL look better than they are"
        )
    return {"calibration": calibration_source(file)}


def _task_figures(ctx: PhaseContext, timings: dict[str, float]) -> JSONObject:
    q = ctx.spec.quality
    out: JSONObject = {}
    for name in q.tasks:
        t0 = time.perf_counter()
        ctx.progress.set(0, 0, f"task {name}")
        try:
            out.update(tasks.run_task(ctx.backend, name, q.task_limit, ctx.progress.set))
        except (AccuracyError, BackendError) as exc:
            ctx.notes[f"task:{tasks.task_key(name)}"] = str(exc)
        timings[f"task:{tasks.task_key(name)}_s"] = time.perf_counter() - t0
    return out


def _corpus_figures(ctx: PhaseContext) -> JSONObject:
    q = ctx.spec.quality
    text, description = corpus_text(q.corpus)
    ids = ctx.backend.tokenizer().encode(text, add_special_tokens=False)[: q.budget_tokens]
    window = min(q.window, ctx.context_length) if ctx.context_length else q.window
    stride = min(q.stride or window, window)
    windows = make_windows(ids, window, stride)
    if not windows:
        raise AccuracyError(f"corpus {description} has fewer than 2 tokens")
    out: JSONObject = {"corpus": description, "corpus_tokens": len(ids), "window": window, "stride": stride}
    want_fid = "fidelity" in q.metrics
    flip_prompts = _flip_prompts(ctx, window) if want_fid else []
    with ExitStack() as stack:
        plan = recipe_pass.Plan(windows, flip_prompts, fidelity=False)
        if want_fid:
            plan = _fidelity_plan(ctx, plan, stack, out)
            if plan.build_to is None:
                stack.close()  # the baseline is on disk: let other jobs read it while this one scores
        out.update(recipe_pass.run(ctx, plan))
    if "ppl" not in q.metrics:
        for k in _PPL_KEYS:
            out.pop(k, None)
    return out


def _fidelity_plan(ctx: PhaseContext, plan: recipe_pass.Plan, stack: ExitStack, out: JSONObject) -> recipe_pass.Plan:
    """The plan with the reference's baseline (or where to build it); no fidelity if unavailable."""
    try:
        got = baselines.acquire(ctx, plan.windows, plan.flip_prompts, stack, out)
    except (AccuracyError, BackendError, ValueError) as exc:
        ctx.notes["fidelity"] = f"unavailable: {exc}"
        return plan
    return recipe_pass.Plan(plan.windows, plan.flip_prompts, True, got.baseline, got.build_to)


def _flip_prompts(ctx: PhaseContext, window: int) -> list[list[int]]:
    n = ctx.spec.quality.flip_prompts
    # Token-id prompts only (every engine's runner path makes those; anything else is skipped).
    return [
        list(p[-window:])
        for p in ctx.prompts[:n]
        if isinstance(p, (list, tuple)) and p and all(isinstance(t, int) for t in p)
    ]


def summary_line(quality: JSONMapping | None) -> str:
    """A short text summary of a quality dict (for logs and tables)."""
    if not quality:
        return "no accuracy measured"
    parts = []
    for key, fmt in (
        ("perplexity", "ppl {:.3f}"),
        ("kl_mean", "KL {:.4f}"),
        ("top1_agreement", "top-1 {:.1%}"),
        ("greedy_flip_rate", "flips {:.1%}"),
    ):
        if isinstance(quality.get(key), (int, float)):
            parts.append(fmt.format(quality[key]))
    parts += [
        f"{k} {v:.1%}"
        for k, v in quality.items()
        if k.startswith("task:") and k.count(":") == 1 and isinstance(v, (int, float))
    ]
    if not parts and quality.get("notes"):
        return "; ".join(f"{k}: {v}" for k, v in quality["notes"].items())
    return ", ".join(parts) or "no accuracy measured"


def dumps(quality: JSONMapping) -> str:
    """Stable JSON of a quality dict."""
    return json.dumps(quality, sort_keys=True, default=float)
