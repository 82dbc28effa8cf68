"""Prompt log-likelihoods from an OpenAI-compatible server: the completions endpoint's ``echo`` + ``logprobs``.

Needs a server that supports ``echo`` with ``logprobs`` on the legacy completions endpoint; a
refusal (or an answer without prompt logprobs) is a clear :class:`~engine.backends.base.BackendError`.
"""

from __future__ import annotations

import json

from engine.backends.base import BackendError, TokenScores
from engine.backends.openai.http import Client, HttpError
from engine.backends.openai.sse import http_reason


async def score_echo(http: Client, model: str, sequences: list[list[int]], top_k: int) -> list[TokenScores]:
    """Each sequence's token log-probabilities after its first token, one request each."""
    import numpy as np

    out = []
    for seq in sequences:
        body = {"model": model, "prompt": seq, "max_tokens": 1, "echo": True, "logprobs": max(top_k, 1)}
        body["temperature"] = 0.0
        try:
            status, raw = await http.fetch("POST", "/completions", json.dumps(body).encode())
        except HttpError as exc:
            raise BackendError(f"scoring (echo + logprobs) failed: {exc}") from exc
        text = raw.decode(errors="replace")
        if status != 200:
            raise BackendError(  # http_reason scrubs the server's text
                f"scoring (echo + logprobs) is not supported by this server: {http_reason(status, text)}"
            )
        try:
            lp = json.loads(text)["choices"][0]["logprobs"]
            token_lps = lp["token_logprobs"][1 : len(seq)]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise BackendError("scoring (echo + logprobs) is not supported by this server: no prompt logprobs") from exc
        if len(token_lps) != len(seq) - 1 or any(v is None for v in token_lps):
            raise BackendError("scoring (echo + logprobs) is not supported by this server: prompt logprobs missing")
        out.append(TokenScores(token_logprobs=np.asarray(token_lps, dtype=np.float32)))
    return out
