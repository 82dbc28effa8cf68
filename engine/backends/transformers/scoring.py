"""Teacher-forced scoring for the accuracy phase: one forward pass per batch of sequences."""

from __future__ import annotations

import torch
from torch import nn

from engine.backends.base import BackendError, TokenScores


def _right_padded(sequences: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(seq) for seq in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids, mask


def _row_scores(logits: torch.Tensor, target: torch.Tensor, top_k: int, full: bool) -> TokenScores:
    """One sequence's scores from its ``[n, vocab]`` logits and its ``n`` next tokens."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    token_lp = logp.gather(1, target[:, None])[:, 0]
    top_ids = top_lp = None
    if top_k > 0:
        top = torch.topk(logp, min(top_k, logp.shape[-1]), dim=-1)
        top_ids, top_lp = top.indices.cpu().numpy(), top.values.cpu().numpy()
    return TokenScores(
        token_logprobs=token_lp.cpu().numpy(),
        top_ids=top_ids,
        top_logprobs=top_lp,
        full=logp.cpu().numpy() if full else None,
    )


def score_sequences(
    model: nn.Module, device: torch.device, sequences: list[list[int]], top_k: int = 0, full: bool = False
) -> list[TokenScores]:
    """Log-softmax of every next token of each sequence under ``model``.

    Sequences are right-padded (causal attention never looks at the padding);
    log-probabilities are taken in float32 whatever the recipe's dtype.
    """
    if not sequences or any(len(seq) < 2 for seq in sequences):
        raise BackendError("score() needs sequences of at least two tokens")
    ids, mask = _right_padded(sequences, model.generation_config.pad_token_id or 0)
    out: list[TokenScores] = []
    try:
        with torch.inference_mode():
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            for row, seq in enumerate(sequences):
                n = len(seq) - 1
                out.append(_row_scores(logits[row, :n], ids[row, 1 : n + 1].to(device), top_k, full))
            del logits
    except torch.OutOfMemoryError as exc:
        raise BackendError(f"out of memory while scoring: {str(exc).splitlines()[0]}") from exc
    return out
