"""The recipe's own pass over the corpus windows: perplexity, and fidelity to the
reference (KL, top-1 agreement, greedy flips) against a :class:`Baseline`.

When the recipe is the reference itself, this pass also builds the baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.accuracy.baseline import Baseline
from engine.accuracy.context import PhaseContext
from engine.accuracy.scoring import (
    Window,
    baseline_top_k,
    greedy_continuations,
    kl_rows,
    nll_blocks,
    stderr_of_mean,
    text_digest,
)
from engine.backends.base import BackendError, TokenScores
from engine.jsonvalue import JSONObject


@dataclass(frozen=True)
class Plan:
    """What the pass scores and against what.

    ``baseline``: the reference's cached numbers (None when this pass builds them or when
    fidelity is off); ``build_to``: where to save the baseline this pass builds.
    """

    windows: list[Window]
    flip_prompts: list[list[int]]
    fidelity: bool
    baseline: Baseline | None = None
    build_to: Path | None = None


@dataclass
class _Scores:
    """What the pass collects window by window, and what the engine turned out to give."""

    fidelity: bool  # still computing fidelity
    full: bool  # the engine still gives full distributions (for KL)
    top1: bool = True  # the engine gives top tokens (for top-1 agreement)
    lp: list[np.ndarray] = field(default_factory=list)
    kl: list[np.ndarray] = field(default_factory=list)
    agree: list[np.ndarray] = field(default_factory=list)
    built: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)


def run(ctx: PhaseContext, plan: Plan) -> JSONObject:
    """Score every window with the recipe; perplexity and (where asked) fidelity figures."""
    scores = _score_windows(ctx, plan)
    lp = np.concatenate(scores.lp).astype(np.float64)
    out = _perplexity(lp)
    out["perplexity_blocks"] = nll_blocks(scores.lp, text_digest(plan.windows))  # for paired intervals
    if not scores.fidelity:
        return out
    baseline = plan.baseline
    if plan.build_to is not None:
        ctx.progress.set(0, 0, "greedy continuations (reference)")
        baseline = Baseline(
            top_ids=np.concatenate([b[0] for b in scores.built]).astype(np.int64),
            top_logprobs=np.concatenate([b[1] for b in scores.built]).astype(np.float32),
            token_logprobs=lp.astype(np.float32),
            greedy=greedy_continuations(ctx.backend, plan.flip_prompts, ctx.spec.quality.flip_tokens),
        )
        baseline.save(plan.build_to)
    out.update(_fidelity(ctx, plan, scores, baseline))
    return out


def _score_windows(ctx: PhaseContext, plan: Plan) -> _Scores:
    scores = _Scores(fidelity=plan.fidelity, full=plan.fidelity, top1=plan.fidelity)
    total = sum(len(w.tokens) for w in plan.windows)
    k = baseline_top_k(getattr(ctx.backend, "name", "")) if plan.build_to is not None else 1
    done, row = 0, 0
    for w in plan.windows:
        sc = _score_window(ctx, w.tokens, k, scores)
        row += _take(ctx, plan, scores, sc, w, row)
        done += len(w.tokens)
        ctx.progress.set(done, total, "scoring the corpus")
    return scores


def _score_window(ctx: PhaseContext, tokens: list[int], top_k: int, scores: _Scores) -> TokenScores:
    """Score one window, asking for the full distribution only while the engine gives it."""
    if scores.full:
        try:
            (sc,) = ctx.backend.score([tokens], top_k=top_k, full=True)
        except BackendError as exc:
            scores.full = False
            ctx.notes["kl"] = f"unavailable: {exc}"
        else:
            if sc.full is None:
                scores.full = False
                ctx.notes["kl"] = "unavailable: this engine gives no full next-token distribution"
            return sc
    (sc,) = ctx.backend.score([tokens], top_k=top_k)
    return sc


def _take(ctx: PhaseContext, plan: Plan, scores: _Scores, sc: TokenScores, w: Window, row: int) -> int:
    """Add one window's scores; returns how many targets it scored."""
    lp = sc.token_logprobs[w.skip :]
    scores.lp.append(lp)
    n = len(lp)
    building = plan.build_to is not None
    if scores.fidelity and building and sc.top_ids is None:
        ctx.notes["fidelity"] = "unavailable: this engine returns no top tokens"
        scores.fidelity = False
    if not scores.fidelity:
        return n
    if building:
        base_ids, base_lp = sc.top_ids[w.skip :], sc.top_logprobs[w.skip :]
        scores.built.append((base_ids, base_lp))
    else:
        base_ids, base_lp = plan.baseline.top_ids[row : row + n], plan.baseline.top_logprobs[row : row + n]
    if scores.full:
        full = sc.full[w.skip :]
        scores.kl.append(kl_rows(base_ids, base_lp, full))
        scores.agree.append(full.argmax(axis=1) == base_ids[:, 0])
    elif sc.top_ids is not None and scores.top1:
        scores.agree.append(sc.top_ids[w.skip :, 0] == base_ids[:, 0])
    else:
        scores.top1 = False
    return n


def _perplexity(lp: np.ndarray) -> JSONObject:
    nll = -lp
    nll_mean = float(nll.mean())
    nll_se = stderr_of_mean(nll)
    ppl = math.exp(nll_mean)
    return {
        "perplexity": ppl,
        "perplexity_tokens": int(nll.size),
        "perplexity_stderr": None if nll_se is None else ppl * nll_se,
        "nll_mean": nll_mean,
        "nll_stderr": nll_se,
    }


def _fidelity(ctx: PhaseContext, plan: Plan, scores: _Scores, baseline: Baseline) -> JSONObject:
    out: JSONObject = {
        "baseline_perplexity": float(math.exp(-float(baseline.token_logprobs.astype(np.float64).mean())))
    }
    if scores.kl and len(scores.kl) == len(plan.windows):
        kl = np.concatenate(scores.kl)
        out.update(
            {
                "kl_mean": float(kl.mean()),
                "kl_p99": float(np.percentile(kl, 99)),
                "kl_stderr": stderr_of_mean(kl),
                "kl_positions": int(kl.size),
                "kl_top_k": int(baseline.top_ids.shape[1]),
            }
        )
    if scores.top1 and scores.agree:
        agree = np.concatenate(scores.agree).astype(np.float64)
        out.update({"top1_agreement": float(agree.mean()), "top1_agreement_stderr": stderr_of_mean(agree)})
        out.update(_flips(ctx, plan.flip_prompts, baseline.greedy))
    else:
        ctx.notes["top1_agreement"] = "unavailable: this engine returns no top tokens"
    return out


def _flips(ctx: PhaseContext, prompts: list[list[int]], greedy: np.ndarray) -> JSONObject:
    if not prompts or greedy.size == 0:
        return {"greedy_flip_tokens": 0}
    ctx.progress.set(0, 0, "greedy flips")
    seqs = [list(p) + greedy[i].tolist() for i, p in enumerate(prompts)]
    flips = []
    for i, sc in enumerate(ctx.backend.score(seqs, top_k=1)):
        start = len(prompts[i]) - 1  # row predicting the first continuation token
        choice = sc.top_ids[start : start + greedy.shape[1], 0]
        flips.append(choice != greedy[i])
    flat = np.concatenate(flips).astype(np.float64)
    return {
        "greedy_flip_rate": float(flat.mean()),
        "greedy_flip_tokens": int(flat.size),
        "greedy_flip_prompts": len(prompts),
    }
