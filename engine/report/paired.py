"""Paired accuracy between two runs scored on the same text or the same examples (pure).

A run's quality record keeps what pairing needs: ``perplexity_blocks`` (NLL sums over blocks of
consecutive scored tokens, with a digest of the tokens; engine.accuracy.scoring.nll_blocks) and,
for a local task, ``task:NAME:correct`` (one ``0``/``1`` per example) with ``task:NAME:examples``
(a digest of the examples). Two runs pair when their digests and block lengths agree; a run
stored before these existed, another corpus or an lm-eval task does not, and its verdict falls
back to the two runs' standard errors (:mod:`engine.report.verdicts`), said so in the footnote.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping
from engine.measure import stats

if TYPE_CHECKING:
    from engine.report.verdicts import Verdict

PAIRED_NOTE = (
    "Accuracy differences are paired where both runs scored the same text: perplexity by a block bootstrap "
    "of the per-block NLL differences (blocks of 64 consecutive scored tokens, drawn in runs of neighbours), "
    "task accuracy by the per-example differences on the same examples."
)
UNPAIRED_NOTE = (
    "Accuracy differences marked unpaired (runs stored before per-block scores, different text, or "
    "lm-eval tasks) add the two runs' standard errors as if independent: wider than a paired interval."
)


def _blocks(quality: JSONMapping | None) -> JSONMapping | None:
    blocks = (quality or {}).get("perplexity_blocks")
    return blocks if isinstance(blocks, Mapping) else None


def perplexity_ratio(base: JSONMapping | None, new: JSONMapping | None) -> stats.Ratio | None:
    """The perplexity ratio new / base with its paired interval, or None when the runs cannot be paired."""
    b, a = _blocks(base), _blocks(new)
    if b is None or a is None:
        return None
    same_text = b.get("text") and b.get("text") == a.get("text") and b.get("block_tokens") == a.get("block_tokens")
    tokens = b.get("tokens")
    if not same_text or not isinstance(tokens, Sequence) or tokens != a.get("tokens"):
        return None
    seed = zlib.crc32(str(b.get("text")).encode())
    try:
        return stats.paired_block_ratio_ci(b.get("nll") or [], a.get("nll") or [], tokens, seed=seed)
    except (TypeError, ValueError):
        return None


def task_difference(name: str, base: JSONMapping | None, new: JSONMapping | None) -> tuple[float, float | None] | None:
    """(mean paired difference, its standard error) of task ``name`` on the same examples; None when unpaired."""
    b, a = base or {}, new or {}
    digest = b.get(f"{name}:examples")
    marks = b.get(f"{name}:correct"), a.get(f"{name}:correct")
    if not digest or digest != a.get(f"{name}:examples") or not all(isinstance(m, str) for m in marks):
        return None
    try:
        return stats.paired_difference([int(c) for c in marks[0]], [int(c) for c in marks[1]])
    except ValueError:
        return None


def accuracy_note(verdicts: Mapping[int, Mapping[str, Verdict]]) -> str:
    """The footnote on accuracy intervals, said once: paired, unpaired, or both (a Verdict has ``paired``)."""
    kinds = {getattr(v, "paired", None) for per_run in verdicts.values() for v in per_run.values()}
    return " ".join(note for kind, note in ((True, PAIRED_NOTE), (False, UNPAIRED_NOTE)) if kind in kinds)
