"""Accuracy of the same recipe on the same engine: perplexity, fidelity, task accuracy.

Every figure is computed through the loaded backend's :meth:`Backend.score` (and the
same recipe and device as the latency measurement), in the job's *evaluating* phase.

Definitions
-----------
- **Corpus windows**: the corpus is tokenized (no special tokens), cut to
  ``budget_tokens`` tokens and scored in windows of ``window`` tokens (clamped to the
  model's context) starting every ``stride`` tokens; each target token is scored once,
  with the longest context its window gives (the first token of the corpus, and of each
  window when ``stride == window``, is never a target).
- **Perplexity** = exp(mean negative log-likelihood of the scored tokens);
  ``perplexity_stderr`` by the delta method from the NLL's standard error (tokens are
  treated as independent, so it is optimistic).
- **Reference recipe**: the same engine's recipe with every knob at its default
  (``type(recipe)()``: transformers, dtype ``auto`` = the model's native precision on that
  device class, i.e. float32 on the CPU, bfloat16/float16 on CUDA; default attention), on
  the same device, same model and same corpus windows.
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

The reference's numbers are cached under ``<cache_dir>/quality/<key>.npz`` keyed by a
fingerprint of model, engine versions, device, reference recipe and the exact token ids,
under a file lock, so a sweep over recipes of one model computes them once.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.base import BackendError
from engine.data.corpus import default_corpus
from engine.spec import JobSpec, QualitySpec, SpecError, canonical_json

QUALITY_VERSION = 1
BASELINE_TOP_K = 256
FULL_DISTRIBUTION_ENGINES = frozenset({"transformers"})  # engines whose score() gives full distributions
PLACEHOLDER_TOKEN = 0  # appended to read the next-token distribution after a sequence
Log = Callable[[str], None]


class QualityError(RuntimeError):
    """One accuracy figure cannot be computed; the message says why (stored in notes)."""


# -- pre-flight ------------------------------------------------------------------------
def check(spec: JobSpec) -> None:
    """Checks before anything loads: corpus and task files exist, packages are there."""
    q = spec.quality
    if not q.enabled:
        return
    if not spec.model.has_accuracy:  # also refused by the spec itself
        raise SpecError("synthetic weights have no accuracy: drop the quality metrics or use a real model")
    if "ppl" in q.metrics or "fidelity" in q.metrics:
        _check_corpus(q.corpus)
    from engine.accuracy import tasks

    for name in q.tasks:
        tasks.check_task(name)


def _check_corpus(corpus: str) -> None:
    if corpus == "default":
        return
    if corpus.startswith("hf:"):
        try:
            import datasets  # noqa: F401
        except ImportError as exc:
            raise SpecError(
                f"corpus {corpus} needs the 'datasets' package, which is not installed here "
                "(and the Hugging Face hub must be reachable); use the default corpus or a text file"
            ) from exc
        return
    path = Path(corpus).expanduser()
    if not path.is_file():
        raise SpecError(f"quality corpus {corpus} is not a file; use 'default', a text file or hf:<dataset>")


# -- corpus --------------------------------------------------------------------------------
def corpus_text(corpus: str) -> tuple[str, str]:
    """The corpus text and a description of where it came from."""
    if corpus == "default":
        import sys

        return (
            default_corpus(),
            f"default (standard-library docstrings, Python {sys.version_info[0]}.{sys.version_info[1]})",
        )
    if corpus.startswith("hf:"):
        return _hf_corpus(corpus)
    path = Path(corpus).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QualityError(f"cannot read corpus {path}: {exc}") from exc
    if not text.strip():
        raise QualityError(f"corpus {path} is empty")
    return text, f"file {path.resolve()}"


def _hf_corpus(corpus: str) -> tuple[str, str]:
    parts = corpus[3:].split(":")
    name, config = parts[0], (parts[1] or None) if len(parts) > 1 else None
    split = parts[2] if len(parts) > 2 and parts[2] else "test"
    column = parts[3] if len(parts) > 3 and parts[3] else "text"
    try:
        import datasets
    except ImportError as exc:
        raise QualityError("the 'datasets' package is not installed") from exc
    try:
        ds = datasets.load_dataset(name, config, split=split)
        texts = [t for t in ds[column] if isinstance(t, str)]
    except Exception as exc:  # offline hub, missing split or column: one reason
        raise QualityError(f"cannot load {name} from the Hugging Face hub: {str(exc).splitlines()[0]}") from exc
    return "\n\n".join(t for t in texts if t.strip()), f"hf {name} config={config} split={split} column={column}"


@dataclass(frozen=True)
class Window:
    """One scored window: its tokens and how many leading targets were already scored."""

    tokens: list[int]
    skip: int  # rows of its TokenScores to leave out (scored by an earlier window)


def make_windows(ids: list[int], window: int, stride: int) -> list[Window]:
    """Cut ``ids`` into windows so that every target token 1..n-1 is scored at most once."""
    out: list[Window] = []
    n = len(ids)
    scored_upto = 0  # highest target index already scored
    for begin in range(0, max(n - 1, 0), stride):
        end = min(begin + window, n)
        if end - begin < 2:
            break
        first_new = max(scored_upto + 1, begin + 1)
        out.append(Window(tokens=ids[begin:end], skip=first_new - (begin + 1)))
        scored_upto = end - 1
        if end == n:
            break
    return out


def reference_recipe(recipe: Any) -> Any:
    """The engine's default recipe: native precision, nothing else changed."""
    return type(recipe)()


# -- the baseline cache ----------------------------------------------------------------------
def _digest(arrays: list[list[int]]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.asarray(a, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


def baseline_key(
    spec: JobSpec,
    resolved_path: str | None,
    engine_info: dict[str, Any],
    windows: list[Window],
    flip_prompts: list[list[int]],
) -> str:
    """Fingerprint of everything the reference numbers depend on."""
    ident = {
        "version": QUALITY_VERSION,
        "top_k": baseline_top_k(spec.recipe.engine),
        "model": spec.model.model_dump(mode="json"),
        "path": resolved_path,
        "device": spec.device,
        "recipe": reference_recipe(spec.recipe).model_dump(mode="json"),
        "engine": {k: engine_info.get(k) for k in ("engine", "torch", "transformers", "vllm", "cuda", "device_name")},
        "windows": _digest([w.tokens for w in windows]),
        "skips": [w.skip for w in windows],
        "flip_prompts": _digest(flip_prompts),
        "flip_tokens": spec.quality.flip_tokens,
    }
    return hashlib.sha256(canonical_json(ident).encode()).hexdigest()[:20]


def cache_dir() -> Path:
    from engine.settings import get_settings

    return get_settings().cache_dir / "quality"


@dataclass
class Baseline:
    """The reference recipe's numbers on the scored positions and the flip prompts."""

    top_ids: np.ndarray  # [N, K] int64
    top_logprobs: np.ndarray  # [N, K] float32
    token_logprobs: np.ndarray  # [N] float32
    greedy: np.ndarray  # [P, T] int64 greedy continuations

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(
            tmp,
            top_ids=self.top_ids,
            top_logprobs=self.top_logprobs,
            token_logprobs=self.token_logprobs,
            greedy=self.greedy,
        )
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> Baseline | None:
        if not path.is_file():
            return None
        try:
            with np.load(path) as z:
                return cls(
                    top_ids=z["top_ids"],
                    top_logprobs=z["top_logprobs"],
                    token_logprobs=z["token_logprobs"],
                    greedy=z["greedy"],
                )
        except (OSError, KeyError, ValueError):
            return None  # a damaged cache file is recomputed


# -- scoring helpers ---------------------------------------------------------------------------
def greedy_continuations(backend: Any, prompts: list[list[int]], n_tokens: int) -> np.ndarray:
    """Greedy continuations by repeated scoring (the Protocol's generate gives no ids)."""
    if not prompts:
        return np.zeros((0, n_tokens), dtype=np.int64)
    seqs = [list(p) for p in prompts]
    for _ in range(n_tokens):
        # Scores cover positions 1..n-1; one placeholder token at the end exposes the
        # distribution after the whole sequence (causal: the placeholder cannot change it).
        for seq, sc in zip(seqs, backend.score([s + [PLACEHOLDER_TOKEN] for s in seqs], top_k=1), strict=True):
            if sc.top_ids is None:
                raise QualityError("this engine returns no top tokens, so greedy continuations are unavailable")
            seq.append(int(sc.top_ids[-1, 0]))
    return np.array([seq[len(p) :] for seq, p in zip(seqs, prompts, strict=True)], dtype=np.int64)


def kl_rows(base_ids: np.ndarray, base_lp: np.ndarray, full: np.ndarray) -> np.ndarray:
    """KL(reference || recipe) per row over the reference's top-k plus one tail bucket."""
    p = np.exp(base_lp.astype(np.float64))
    q_lp = np.take_along_axis(full, base_ids, axis=1).astype(np.float64)
    kl = np.sum(p * (base_lp - q_lp), axis=1)
    p_rest = np.clip(1.0 - p.sum(axis=1), 0.0, 1.0)
    q_rest = np.clip(1.0 - np.exp(q_lp).sum(axis=1), 1e-30, 1.0)
    tail = np.where(p_rest > 1e-12, p_rest * (np.log(np.maximum(p_rest, 1e-30)) - np.log(q_rest)), 0.0)
    return np.maximum(kl + tail, 0.0)


def _flip_prompts(spec: JobSpec, prompts: list[list[int]], window: int) -> list[list[int]]:
    n = spec.quality.flip_prompts
    # Token-id prompts only (every engine's runner path makes those; anything else is skipped).
    return [
        list(p[-window:])
        for p in prompts[:n]
        if isinstance(p, (list, tuple)) and p and all(isinstance(t, int) for t in p)
    ]


def _stderr_of_mean(values: np.ndarray) -> float | None:
    if values.size < 2:
        return None
    return float(values.std(ddof=1) / math.sqrt(values.size))


# -- the phase -------------------------------------------------------------------------------------
@dataclass
class _Progress:
    state: Any
    note: str = ""

    def set(self, done: int, total: int, note: str) -> None:
        if self.state is None:
            return
        self.state.tokens_done, self.state.tokens_total, self.state.note = done, total, note


def evaluate(
    spec: JobSpec,
    backend: Any,
    resolved: Any,
    prompts: list[list[int]],
    state: Any = None,
    log: Log = print,
    context_length: int | None = None,
    load_reference: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Run the accuracy phase with an already loaded ``backend``; returns the quality dict.

    ``prompts`` are the workload's measured prompts (for greedy flips). ``load_reference``
    loads a backend with the reference recipe when the baseline is not cached and the
    recipe is not the reference itself (the runner passes one; tests may too).
    Figures that cannot be computed are left out and explained under ``notes``.
    """
    q: QualitySpec = spec.quality
    result: dict[str, Any] = {}
    notes: dict[str, str] = {}
    timings: dict[str, float] = {}
    progress = _Progress(state)
    if not spec.model.has_accuracy or backend.tokenizer() is None:
        return {"notes": {"accuracy": "no accuracy: synthetic (random) weights"}}
    if not callable(getattr(backend, "score", None)):
        return {"notes": {"accuracy": f"the {getattr(backend, 'name', '?')} engine cannot score text yet"}}
    if "ppl" in q.metrics or "fidelity" in q.metrics:
        t0 = time.perf_counter()
        try:
            result.update(
                _corpus_figures(spec, backend, resolved, prompts, progress, log, context_length, load_reference, notes)
            )
        except (QualityError, BackendError) as exc:  # the latency numbers are kept either way
            notes["corpus"] = str(exc)
        timings["corpus_s"] = time.perf_counter() - t0
    if getattr(spec.recipe, "kv_cache_quantization", "none") != "none":
        notes["scope"] = (
            "figures are scored with full forward passes: the quantized KV cache acts during "
            "generation only, so perplexity, KL, top-1 and flips do not see it"
        )
    if q.tasks:
        from engine.accuracy import tasks

        for name in q.tasks:
            t0 = time.perf_counter()
            progress.set(0, 0, f"task {name}")
            try:
                result.update(tasks.run_task(backend, name, q.task_limit, progress.set))
            except (QualityError, BackendError) as exc:
                notes[f"task:{tasks.task_key(name)}"] = str(exc)
            timings[f"task:{tasks.task_key(name)}_s"] = time.perf_counter() - t0
    result["timings_s"] = timings
    if notes:
        result["notes"] = notes
    return result


def _corpus_figures(
    spec: JobSpec,
    backend: Any,
    resolved: Any,
    prompts: list[list[int]],
    progress: _Progress,
    log: Log,
    context_length: int | None,
    load_reference: Callable[[], Any] | None,
    notes: dict[str, str],
) -> dict[str, Any]:
    q = spec.quality
    want_ppl, want_fid = "ppl" in q.metrics, "fidelity" in q.metrics
    tokenizer = backend.tokenizer()
    text, description = corpus_text(q.corpus)
    ids = tokenizer.encode(text, add_special_tokens=False)[: q.budget_tokens]
    window = min(q.window, context_length) if context_length else q.window
    stride = min(q.stride or window, window)
    windows = make_windows(ids, window, stride)
    if not windows:
        raise QualityError(f"corpus {description} has fewer than 2 tokens")
    out: dict[str, Any] = {"corpus": description, "corpus_tokens": len(ids), "window": window, "stride": stride}
    flip_prompts = _flip_prompts(spec, prompts, window) if want_fid else []

    baseline: Baseline | None = None
    build_here = False  # the recipe is the reference: its own pass builds the baseline
    with ExitStack() as stack:
        if want_fid:
            try:
                baseline, build_here, path = _acquire_baseline(
                    spec, backend, resolved, windows, flip_prompts, stack, out, log, progress, load_reference
                )
            except (QualityError, BackendError, ValueError) as exc:
                notes["fidelity"] = f"unavailable: {exc}"
                want_fid, baseline, build_here, path = False, None, False, None
            if not build_here:
                stack.close()  # the baseline is on disk: let other jobs read it while this one scores
        out.update(
            _recipe_pass(
                backend,
                windows,
                baseline,
                want_fid,
                build_here,
                flip_prompts,
                q.flip_tokens,
                progress,
                notes,
                path if build_here else None,
            )
        )
    if not want_ppl:
        for k in ("perplexity", "perplexity_tokens", "perplexity_stderr", "nll_mean", "nll_stderr"):
            out.pop(k, None)
    return out


def _acquire_baseline(
    spec: JobSpec,
    backend: Any,
    resolved: Any,
    windows: list[Window],
    flip_prompts: list[list[int]],
    stack: ExitStack,
    out: dict[str, Any],
    log: Log,
    progress: _Progress,
    load_reference: Callable[[], Any] | None,
) -> tuple[Baseline | None, bool, Path]:
    """The cached baseline, or compute it (under the file lock held by ``stack``).

    Returns (baseline, build_here, path): ``build_here`` when the recipe is the reference
    itself and its own pass will build the baseline (the lock stays held until then).
    """
    from filelock import FileLock

    reference = reference_recipe(spec.recipe)  # ValueError where an engine has no default recipe
    key = baseline_key(spec, getattr(resolved, "path", None), backend.info(), windows, flip_prompts)
    path = cache_dir() / f"{key}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    stack.enter_context(FileLock(str(path) + ".lock"))
    baseline = Baseline.load(path)
    out["baseline_key"] = key
    out["baseline_cached"] = baseline is not None
    if baseline is not None:
        return baseline, False, path
    if spec.recipe == reference:
        return None, True, path
    if load_reference is None:
        raise QualityError("no way to load the reference recipe here")
    log("computing the reference recipe's numbers (once per model, corpus and device)")
    progress.set(0, 0, "loading the reference recipe")
    ref = load_reference()
    try:
        baseline = _baseline_pass(ref, windows, flip_prompts, spec.quality.flip_tokens, progress)
    finally:
        ref.unload()
    baseline.save(path)
    return baseline, False, path


def baseline_top_k(engine: str) -> int:
    """Tokens the reference keeps per position: many where the engine gives full
    distributions (for KL), one elsewhere (enough for top-1 agreement and flips)."""
    return BASELINE_TOP_K if engine in FULL_DISTRIBUTION_ENGINES else 1


def _baseline_pass(
    backend: Any, windows: list[Window], flip_prompts: list[list[int]], flip_tokens: int, progress: _Progress
) -> Baseline:
    ids, lps, tok = [], [], []
    total = sum(len(w.tokens) for w in windows)
    done = 0
    k = baseline_top_k(getattr(backend, "name", ""))
    for w in windows:
        (sc,) = backend.score([w.tokens], top_k=k)
        if sc.top_ids is None:
            raise QualityError("the reference recipe's engine returns no top tokens, so fidelity is unavailable")
        ids.append(sc.top_ids[w.skip :])
        lps.append(sc.top_logprobs[w.skip :])
        tok.append(sc.token_logprobs[w.skip :])
        done += len(w.tokens)
        progress.set(done, total, "reference recipe: corpus")
    progress.set(0, 0, "reference recipe: greedy continuations")
    greedy = greedy_continuations(backend, flip_prompts, flip_tokens)
    return Baseline(
        top_ids=np.concatenate(ids).astype(np.int64),
        top_logprobs=np.concatenate(lps).astype(np.float32),
        token_logprobs=np.concatenate(tok).astype(np.float32),
        greedy=greedy,
    )


def _score_window(backend: Any, tokens: list[int], top_k: int, caps: dict[str, bool], notes: dict[str, str]) -> Any:
    """Score one window, asking for the full distribution only while the engine gives it."""
    if caps["full"]:
        try:
            (sc,) = backend.score([tokens], top_k=top_k, full=True)
        except BackendError as exc:
            caps["full"] = False
            notes["kl"] = f"unavailable: {exc}"
        else:
            if sc.full is None:
                caps["full"] = False
                notes["kl"] = "unavailable: this engine gives no full next-token distribution"
            return sc
    (sc,) = backend.score([tokens], top_k=top_k)
    return sc


def _recipe_pass(
    backend: Any,
    windows: list[Window],
    baseline: Baseline | None,
    want_fid: bool,
    build_here: bool,
    flip_prompts: list[list[int]],
    flip_tokens: int,
    progress: _Progress,
    notes: dict[str, str],
    save_to: Path | None,
) -> dict[str, Any]:
    lp_all: list[np.ndarray] = []
    kl_all: list[np.ndarray] = []
    agree_all: list[np.ndarray] = []
    built: list[tuple[np.ndarray, np.ndarray]] = []
    total = sum(len(w.tokens) for w in windows)
    done, row = 0, 0
    caps = {"full": want_fid}
    top1_ok = want_fid
    k = baseline_top_k(getattr(backend, "name", "")) if build_here else 1
    for w in windows:
        sc = _score_window(backend, w.tokens, k, caps, notes)
        lp = sc.token_logprobs[w.skip :]
        lp_all.append(lp)
        n = len(lp)
        if want_fid and build_here and sc.top_ids is None:
            notes["fidelity"] = "unavailable: this engine returns no top tokens"
            want_fid = False
        if want_fid:
            if build_here:
                base_ids, base_lp = sc.top_ids[w.skip :], sc.top_logprobs[w.skip :]
                built.append((base_ids, base_lp))
            else:
                base_ids, base_lp = baseline.top_ids[row : row + n], baseline.top_logprobs[row : row + n]
            if caps["full"]:
                full = sc.full[w.skip :]
                kl_all.append(kl_rows(base_ids, base_lp, full))
                agree_all.append(full.argmax(axis=1) == base_ids[:, 0])
            elif sc.top_ids is not None and top1_ok:
                agree_all.append(sc.top_ids[w.skip :, 0] == base_ids[:, 0])
            else:
                top1_ok = False
        row += n
        done += len(w.tokens)
        progress.set(done, total, "scoring the corpus")
    lp = np.concatenate(lp_all).astype(np.float64)
    nll = -lp
    nll_mean = float(nll.mean())
    nll_se = _stderr_of_mean(nll)
    ppl = math.exp(nll_mean)
    out: dict[str, Any] = {
        "perplexity": ppl,
        "perplexity_tokens": int(nll.size),
        "perplexity_stderr": None if nll_se is None else ppl * nll_se,
        "nll_mean": nll_mean,
        "nll_stderr": nll_se,
    }
    if not want_fid:
        return out
    if build_here:
        progress.set(0, 0, "greedy continuations (reference)")
        baseline = Baseline(
            top_ids=np.concatenate([b[0] for b in built]).astype(np.int64),
            top_logprobs=np.concatenate([b[1] for b in built]).astype(np.float32),
            token_logprobs=lp.astype(np.float32),
            greedy=greedy_continuations(backend, flip_prompts, flip_tokens),
        )
        if save_to is not None:
            baseline.save(save_to)
    out["baseline_perplexity"] = float(math.exp(-float(baseline.token_logprobs.astype(np.float64).mean())))
    if kl_all and len(kl_all) == len(windows):
        kl = np.concatenate(kl_all)
        out.update(
            {
                "kl_mean": float(kl.mean()),
                "kl_p99": float(np.percentile(kl, 99)),
                "kl_stderr": _stderr_of_mean(kl),
                "kl_positions": int(kl.size),
                "kl_top_k": int(baseline.top_ids.shape[1]),
            }
        )
    if top1_ok and agree_all:
        agree = np.concatenate(agree_all).astype(np.float64)
        out.update({"top1_agreement": float(agree.mean()), "top1_agreement_stderr": _stderr_of_mean(agree)})
        out.update(_flips(backend, flip_prompts, baseline.greedy, progress))
    else:
        notes["top1_agreement"] = "unavailable: this engine returns no top tokens"
    return out


def _flips(backend: Any, prompts: list[list[int]], greedy: np.ndarray, progress: _Progress) -> dict[str, Any]:
    if not prompts or greedy.size == 0:
        return {"greedy_flip_tokens": 0}
    progress.set(0, 0, "greedy flips")
    seqs = [list(p) + greedy[i].tolist() for i, p in enumerate(prompts)]
    flips = []
    for i, sc in enumerate(backend.score(seqs, top_k=1)):
        start = len(prompts[i]) - 1  # row predicting the first continuation token
        choice = sc.top_ids[start : start + greedy.shape[1], 0]
        flips.append(choice != greedy[i])
    flat = np.concatenate(flips).astype(np.float64)
    return {
        "greedy_flip_rate": float(flat.mean()),
        "greedy_flip_tokens": int(flat.size),
        "greedy_flip_prompts": len(prompts),
    }


def summary_line(quality: dict[str, Any] | None) -> str:
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


def dumps(quality: dict[str, Any]) -> str:
    """Stable JSON of a quality dict."""
    return json.dumps(quality, sort_keys=True, default=float)
