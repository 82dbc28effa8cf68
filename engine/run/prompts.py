"""Prompts for a workload: exact-length windows of the default corpus, a user's prompt
file, or random token ids for synthetic weights (which have no tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from engine.data.corpus import default_corpus
from engine.spec import SpecError, Workload


def read_prompt_file(path: str) -> list[str]:
    """One prompt per line, or JSONL objects with a ``prompt`` (or ``text``) field."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise SpecError(f"prompt file {file} does not exist")
    try:
        lines = [ln for ln in file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except UnicodeDecodeError as exc:
        raise SpecError(f"prompt file {file} is not UTF-8 text") from exc
    prompts = []
    for ln in lines:
        if ln.lstrip().startswith("{"):
            try:
                obj = json.loads(ln)
            except json.JSONDecodeError as exc:
                raise SpecError(f"prompt file {file}: a line starting with '{{' is not valid JSON") from exc
            text = obj.get("prompt") or obj.get("text")
            if not isinstance(text, str):
                raise SpecError(f"prompt file {file}: JSON lines need a 'prompt' string")
            prompts.append(text)
        else:
            prompts.append(ln)
    if not prompts:
        raise SpecError(f"prompt file {file} holds no prompts")
    return prompts


def make_prompts(workload: Workload, count: int, tokenizer: Any | None, vocab_size: int) -> list[list[int]]:
    """``count`` prompts as token-id lists, seeded by the workload's seed.

    With ``prompt_tokens`` each prompt has exactly that many tokens: a window of the
    tokenized default corpus at a seeded offset (random ids when there is no tokenizer).
    With ``prompt_file`` the file's prompts are tokenized and cycled.
    """
    rng = np.random.default_rng(workload.seed)
    if workload.prompt_file is not None:
        if tokenizer is None:
            raise SpecError("a prompt file needs a model with a tokenizer (synthetic weights have none)")
        texts = read_prompt_file(workload.prompt_file)
        encoded = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
        return [encoded[i % len(encoded)] for i in range(count)]
    n = int(workload.prompt_tokens or 1)
    if tokenizer is None:
        return [rng.integers(0, vocab_size, size=n).tolist() for _ in range(count)]
    ids = corpus_token_ids(tokenizer)
    while len(ids) < n + 1:
        ids = ids + ids
    starts = rng.integers(0, len(ids) - n, size=count)
    return [ids[s : s + n] for s in starts]


_CACHE: dict[int, list[int]] = {}


def corpus_token_ids(tokenizer: Any) -> list[int]:
    key = id(tokenizer)
    if key not in _CACHE:
        _CACHE[key] = tokenizer.encode(default_corpus(), add_special_tokens=False)
    return _CACHE[key]
