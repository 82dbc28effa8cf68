"""The traffic a job would send, before it is queued: what Launch's "Preview traffic" shows.

:func:`preview` plans the workload's requests with the real request source
(:mod:`engine.run.sources`: the same readers, sampling, seeds and clipping as the job) and the
model's light tokenizer (:func:`engine.run.sources.context.plan_context`: ``tokenizer.json`` from the model's
local or cached folder: the demo model's converted folder, a local folder, a Hugging Face id in
the cache; synthetic weights have none and send random token ids). Nothing here imports torch or
transformers, nothing is downloaded and nothing is converted, so the app server may call it.

The work is capped: at most :data:`PREVIEW_CAP` measured requests are planned (a trace's first
rows of its window, a dataset's first sampled conversations, the first turns of sessions), and
the preview says so. Bad input raises the one-line :class:`~engine.spec.SpecError` the sources
raise. Pure figures of the result are in :mod:`engine.report.traffic_figures`.

**Shared-prefix share**: the fraction of the previewed prompt tokens that repeat a prefix an
earlier prompt already sent, counted the way a prefix cache reuses them: each prompt is cut into
blocks of :data:`PREFIX_BLOCK` tokens, each block keyed by itself *and everything before it*
(a chained hash), and a prompt's leading blocks whose key was seen before count as shared (an
unbounded cache, no eviction). Mooncake hash ids (equal ids, equal 512-token blocks) and shared
prefixes show up this way; a session's later turns are built from the real replies when sent, so
only first turns are counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from engine.spec import JobSpec, ModelSpec, SpecError, Workload

PREVIEW_CAP = 2000  # measured requests planned by a preview at most
PREFIX_BLOCK = 16  # tokens per block of the shared-prefix share (vLLM's default KV block)
SOURCE_WORDS = {
    "synthetic": "synthetic prompts",
    "prompt_file": "prompt file",
    "dataset": "dataset",
    "sessions": "multi-turn sessions",
    "trace": "trace replay",
}


class PreviewUnavailable(LookupError):
    """The traffic cannot be previewed here (the model's tokenizer is not on this machine yet); the job
    itself may still run: this is no reason to refuse it."""


@dataclass(frozen=True)
class TrafficPreview:
    """The previewed requests as numbers (module doc)."""

    source: str  # in words: "trace mooncake.jsonl (mooncake), 2x faster"
    requests: int  # measured requests the job will send (a trace: rows previewed, capped)
    previewed: int  # measured requests planned here (at most PREVIEW_CAP)
    capped: bool  # the job sends (or may send) more than were previewed
    duration_s: float | None  # trace: span of due times; arrival process: requests / rate; closed loop: None
    duration_basis: str  # how the duration was found, in words
    due_s: list[float]  # due times of the previewed requests (empty for a closed loop)
    prompt_tokens: list[int]  # per previewed request (sessions: first turns only)
    output_tokens: list[int]
    prefix_share: float | None  # None: no prompt tokens to count
    turns_per_session: list[int]  # one entry per session (empty without sessions)
    facts: dict[str, Any] = field(default_factory=dict)  # what the source counted: rows skipped, clipped ...
    notes: list[str] = field(default_factory=list)  # caveats in words (the cap, a missing tokenizer)


# -- the preview -------------------------------------------------------------------------------
def _capped(workload: Workload) -> Workload:
    """The workload planned by a preview: at most PREVIEW_CAP measured requests, no warm-up."""
    return workload.model_copy(update={"requests": min(workload.requests, PREVIEW_CAP), "warmup_requests": 0})


def prefix_share(prompts: list[list[int]], block: int = PREFIX_BLOCK) -> float | None:
    """The share of prompt tokens in leading blocks an earlier prompt already had (module doc); None without tokens."""
    seen: set[int] = set()
    total = again = 0
    for ids in prompts:
        total += len(ids)
        key, keys = 0, []
        for start in range(0, len(ids) - block + 1, block):
            key = hash((key, tuple(ids[start : start + block])))
            keys.append(key)
        shared = 0
        while shared < len(keys) and keys[shared] in seen:
            shared += 1
        again += shared * block
        seen.update(keys)
    return round(again / total, 4) if total else None


def source_words(workload: Workload) -> str:
    """The source in words with its file and format (the source says them): ``trace replay t.jsonl (mooncake)``."""
    return workload.traffic.words()


def _duration(workload: Workload, due: list[float], count: int) -> tuple[float | None, str]:
    if workload.traffic.scheduled:
        span = max(due) if due else 0.0
        return span, f"span of the {workload.traffic.label}'s due times"
    if workload.arrival in ("poisson", "gamma") and workload.rate:
        return count / workload.rate, f"{count:,} requests / {workload.rate:g} req/s"
    return None, "a closed loop: as long as the server takes to answer"


def _arrival_due(workload: Workload, count: int) -> list[float]:
    """An arrival process's due times (the driver's own, seeded); none for a closed loop."""
    if workload.arrival not in ("poisson", "gamma") or not workload.rate:
        return []
    from engine.run.load import arrival_offsets_s

    return arrival_offsets_s(count, workload.arrival, workload.rate, workload.burstiness, workload.seed).tolist()


def preview(spec_or_workload: JobSpec | Workload, model: ModelSpec | str | None = None) -> TrafficPreview:
    """The traffic of a job (or of a workload for ``model``): numbers and the per-request lengths (module doc).

    Raises :class:`SpecError` in one line for bad input (a file outside the allowed roots, a malformed
    row), :class:`PreviewUnavailable` when a dataset needs the model's tokenizer and it is not here."""
    from engine.run.sources import plan_requests
    from engine.run.sources.context import plan_context

    if isinstance(spec_or_workload, JobSpec):
        from engine.run.policy import check_inputs

        check_inputs(spec_or_workload)
        workload, model = spec_or_workload.workload, spec_or_workload.model
    else:
        workload = spec_or_workload
    model = ModelSpec(source=model) if isinstance(model, str) else model or ModelSpec(source="demo")
    ctx, no_tokenizer = plan_context(model)
    traffic = workload.traffic
    if no_tokenizer and traffic.needs_tokenizer:
        raise PreviewUnavailable(f"previewing the {traffic.words()} needs the model's tokenizer: {no_tokenizer}")
    try:
        plan = plan_requests(_capped(workload), ctx)
    except SpecError:
        raise
    except (ValueError, OSError) as exc:  # a source's own checks raise SpecError; anything else in one line too
        raise SpecError(f"{traffic.words()}: {type(exc).__name__}: {exc}") from exc
    measured = plan.measured
    sessions = Counter(p.session for p in measured if p.session is not None)
    due = [float(p.due_s) for p in measured if p.due_s is not None] or _arrival_due(workload, len(measured))
    firsts = [p for p in measured if not p.turn]
    total = len(measured) if traffic.scheduled else workload.requests
    duration, basis = _duration(workload, due, total)
    capped = workload.requests > PREVIEW_CAP and len(measured) >= PREVIEW_CAP
    notes = _notes(workload, len(measured), capped, no_tokenizer)
    return TrafficPreview(
        source=source_words(workload),
        requests=total,
        previewed=len(measured),
        capped=capped,
        duration_s=duration,
        duration_basis=basis,
        due_s=due,
        prompt_tokens=[p.prompt_tokens for p in firsts],
        output_tokens=[p.output_tokens for p in measured],
        prefix_share=prefix_share([list(p.request.prompt) for p in firsts]),
        turns_per_session=[sessions[s] for s in sorted(sessions)],
        facts={k: v for k, v in plan.facts.items() if k not in ("trace", "dataset", "format")},
        notes=notes,
    )


def _notes(workload: Workload, planned: int, capped: bool, no_tokenizer: str | None) -> list[str]:
    notes = []
    if capped:
        what = f"rows of the {workload.traffic.label}" if workload.traffic.scheduled else "requests"
        notes.append(f"the first {planned:,} {what} previewed (a preview plans at most {PREVIEW_CAP:,})")
    if workload.traffic.sessions:
        notes.append("later turns carry the replies the server really returns: only first turns' prompts are counted")
    if no_tokenizer and workload.traffic.file_field:
        notes.append(f"prompts as random token ids: {no_tokenizer}")
    return notes
