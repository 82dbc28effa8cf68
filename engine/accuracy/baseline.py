"""The reference recipe's numbers, computed once per model, engine, device and corpus.

They are cached under ``<cache_dir>/quality/<key>.npz``, keyed by a fingerprint of model,
engine versions, device, reference recipe and the exact token ids, under a file lock, so
a sweep over recipes of one model computes them once.
"""

from __future__ import annotations

import hashlib
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from engine.accuracy.context import PhaseContext, Progress
from engine.accuracy.scoring import AccuracyError, Window, baseline_top_k, greedy_continuations
from engine.backends.base import Backend
from engine.jsonvalue import JSONMapping, JSONObject
from engine.spec import JobSpec, canonical_json, engines
from engine.spec.recipes import EngineRecipe

QUALITY_VERSION = 1
_Recipe = TypeVar("_Recipe", bound=EngineRecipe)


def reference_recipe(recipe: _Recipe) -> _Recipe:
    """The engine's default recipe: native precision, nothing else changed."""
    return type(recipe)()


def _digest(arrays: list[list[int]]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.asarray(a, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


def baseline_key(
    spec: JobSpec,
    resolved_path: str | None,
    engine_info: JSONMapping,
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
        "engine": {
            k: engine_info.get(k) for k in ("engine", *engines.packages(versions_only=True), "cuda", "device_name")
        },
        "windows": _digest([w.tokens for w in windows]),
        "skips": [w.skip for w in windows],
        "flip_prompts": _digest(flip_prompts),
        "flip_tokens": spec.quality.flip_tokens,
    }
    return hashlib.sha256(canonical_json(ident).encode()).hexdigest()[:20]


def cache_dir() -> Path:
    """Where baselines are cached (``<settings cache_dir>/quality``)."""
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


@dataclass(frozen=True)
class Acquired:
    """The cached (or just computed) baseline, or where this recipe's own pass saves it.

    ``build_to`` is set when the recipe is the reference itself: its own pass builds the
    baseline and saves it there (the lock stays held until then).
    """

    baseline: Baseline | None
    build_to: Path | None


def acquire(
    ctx: PhaseContext, windows: list[Window], flip_prompts: list[list[int]], stack: ExitStack, out: JSONObject
) -> Acquired:
    """The cached baseline, or compute it (under the file lock held by ``stack``).

    Records ``baseline_key`` and ``baseline_cached`` into ``out`` as soon as they are known.
    """
    from filelock import FileLock

    spec = ctx.spec
    reference = reference_recipe(spec.recipe)  # ValueError where an engine has no default recipe
    key = baseline_key(spec, getattr(ctx.resolved, "path", None), ctx.backend.info(), windows, flip_prompts)
    path = cache_dir() / f"{key}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    stack.enter_context(FileLock(str(path) + ".lock"))
    baseline = Baseline.load(path)
    out["baseline_key"] = key
    out["baseline_cached"] = baseline is not None
    if baseline is not None:
        return Acquired(baseline, None)
    if spec.recipe == reference:
        return Acquired(None, path)
    if ctx.load_reference is None:
        raise AccuracyError("no way to load the reference recipe here")
    ctx.log("computing the reference recipe's numbers (once per model, corpus and device)")
    ctx.progress.set(0, 0, "loading the reference recipe")
    ref = ctx.load_reference()
    try:
        baseline = baseline_pass(ref, windows, flip_prompts, spec.quality.flip_tokens, ctx.progress)
    finally:
        ref.unload()
    baseline.save(path)
    return Acquired(baseline, None)


def baseline_pass(
    backend: Backend, windows: list[Window], flip_prompts: list[list[int]], flip_tokens: int, progress: Progress
) -> Baseline:
    """The reference recipe's top-k, token log-probabilities and greedy continuations."""
    ids, lps, tok = [], [], []
    total = sum(len(w.tokens) for w in windows)
    done = 0
    k = baseline_top_k(getattr(backend, "name", ""))
    for w in windows:
        (sc,) = backend.score([w.tokens], top_k=k)
        if sc.top_ids is None:
            raise AccuracyError("the reference recipe's engine returns no top tokens, so fidelity is unavailable")
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
