"""Pure scoring helpers shared by the accuracy phase, local tasks and the lm-eval adapter:
corpus windows, KL over a truncated reference distribution, greedy decoding by repeated
scoring, the standard error of a mean, and the phase's one exception type."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.backends.base import Backend, Tokenizer
from engine.spec import engines

PLACEHOLDER_TOKEN = 0  # appended to read the next-token distribution after a sequence
BASELINE_TOP_K = 256
BLOCK_TOKENS = 64  # scored tokens per block of stored NLL sums (paired intervals between runs)
MAX_BLOCKS = 4096  # more scored tokens make longer blocks, so a quality record stays a few tens of kB


class AccuracyError(RuntimeError):
    """One accuracy figure cannot be computed; the message says why (stored in notes)."""


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


def baseline_top_k(engine: str) -> int:
    """Tokens the reference keeps per position: many where the engine gives full
    distributions (for KL), one elsewhere (enough for top-1 agreement and flips)."""
    descriptor = engines.find(engine)  # its capabilities say whether score() gives full distributions
    return BASELINE_TOP_K if descriptor is not None and descriptor.capabilities.full_distributions else 1


def kl_rows(base_ids: np.ndarray, base_lp: np.ndarray, full: np.ndarray) -> np.ndarray:
    """KL(reference || recipe) per row over the reference's top-k plus one tail bucket."""
    p = np.exp(base_lp.astype(np.float64))
    q_lp = np.take_along_axis(full, base_ids, axis=1).astype(np.float64)
    kl = np.sum(p * (base_lp - q_lp), axis=1)
    p_rest = np.clip(1.0 - p.sum(axis=1), 0.0, 1.0)
    q_rest = np.clip(1.0 - np.exp(q_lp).sum(axis=1), 1e-30, 1.0)
    tail = np.where(p_rest > 1e-12, p_rest * (np.log(np.maximum(p_rest, 1e-30)) - np.log(q_rest)), 0.0)
    return np.maximum(kl + tail, 0.0)


def text_digest(windows: list[Window]) -> str:
    """What was scored, as a short digest: every window's token ids and how many of its targets count.

    Two runs with the same digest scored the very same tokens, so their NLL can be paired."""
    h = hashlib.sha256()
    for w in windows:
        h.update(np.asarray(w.tokens, dtype=np.int64).tobytes())
        h.update(f"|{w.skip}|".encode())
    return h.hexdigest()[:20]


def nll_blocks(per_window: list[np.ndarray], digest: str) -> dict[str, object]:
    """Negative log-likelihood summed over blocks of consecutive scored tokens, never across a window.

    ``{"block_tokens": 64, "tokens": [64, 64, ..., 31], "nll": [sums], "text": digest}``: what a paired
    interval between two runs that scored the same text needs (engine.measure.stats.paired_block_ratio_ci).
    Blocks are :data:`BLOCK_TOKENS` long (longer when there would be more than :data:`MAX_BLOCKS`).
    """
    total = sum(int(lp.size) for lp in per_window)
    size = max(BLOCK_TOKENS, math.ceil(total / MAX_BLOCKS))
    tokens: list[int] = []
    sums: list[float] = []
    for lp in per_window:
        nll = -np.asarray(lp, dtype=np.float64)
        for start in range(0, nll.size, size):
            part = nll[start : start + size]
            tokens.append(int(part.size))
            sums.append(round(float(part.sum()), 6))
    return {"block_tokens": size, "tokens": tokens, "nll": sums, "text": digest}


def stderr_of_mean(values: np.ndarray) -> float | None:
    """Sample standard error of the mean (None under two values)."""
    if values.size < 2:
        return None
    return float(values.std(ddof=1) / math.sqrt(values.size))


def greedy_continuations(backend: Backend, prompts: list[list[int]], n_tokens: int) -> np.ndarray:
    """Greedy continuations by repeated scoring (the Protocol's generate gives no ids)."""
    if not prompts:
        return np.zeros((0, n_tokens), dtype=np.int64)
    seqs = [list(p) for p in prompts]
    for _ in range(n_tokens):
        # Scores cover positions 1..n-1; one placeholder token at the end exposes the
        # distribution after the whole sequence (causal: the placeholder cannot change it).
        for seq, sc in zip(seqs, backend.score([s + [PLACEHOLDER_TOKEN] for s in seqs], top_k=1), strict=True):
            if sc.top_ids is None:
                raise AccuracyError("this engine returns no top tokens, so greedy continuations are unavailable")
            seq.append(int(sc.top_ids[-1, 0]))
    return np.array([seq[len(p) :] for seq, p in zip(seqs, prompts, strict=True)], dtype=np.int64)


def greedy_ids(
    backend: Backend, prompt: list[int], max_tokens: int, stop: Callable[[list[int]], bool], eos: int | None
) -> list[int]:
    """Greedy continuation of ``prompt`` by repeated scoring, until EOS, ``stop`` or ``max_tokens``."""
    seq = list(prompt)
    for _ in range(max_tokens):
        (sc,) = backend.score([seq + [PLACEHOLDER_TOKEN]], top_k=1)  # last row: after the whole sequence
        if sc.top_ids is None:
            raise AccuracyError("this engine returns no top tokens, so greedy answers are unavailable")
        token = int(sc.top_ids[-1, 0])
        if token == eos:
            break
        seq.append(token)
        if stop(seq[len(prompt) :]):
            break
    return seq[len(prompt) :]


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` without special tokens."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def continuation_ids(tokenizer: Tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """Token ids of context and continuation, split where the joint tokenization allows."""
    ctx = encode(tokenizer, context)
    whole = encode(tokenizer, context + continuation)
    if whole[: len(ctx)] == ctx and len(whole) > len(ctx):
        return ctx, whole[len(ctx) :]
    return ctx, encode(tokenizer, continuation)
