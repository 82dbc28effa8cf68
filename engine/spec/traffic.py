"""Traffic like production, as workload fields (pure): datasets, multi-turn sessions, shared
prefixes, trace replay, per-request output lengths and cancellations.

:class:`TrafficFields` is a base of :class:`engine.spec.workload.Workload`: its fields sit beside
the workload's others (one flat form, one JSON object) and, at their defaults, stay out of
fingerprints (:data:`TRAFFIC_DEFAULTS`). Which request source reads them is said by
:attr:`Workload.source`; the sources live in :mod:`engine.run.sources`, the readers of files in
:mod:`engine.data`. Nothing here opens a file: ``source_sha256`` (the input's content hash, part
of the fingerprint) is filled in by whoever queues the job, after reading the file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from engine.spec.base import _Strict

DatasetFormat = Literal["sharegpt", "openai-chat", "text"]
TraceFormat = Literal["mooncake", "azure", "burstgpt"]

TRACE_ROWS_CAP = 1_000_000  # a trace without ``requests``: every row of its window, at most this many
# Traffic fields whose defaults are left out of fingerprints (runs from before they existed keep theirs).
TRAFFIC_DEFAULTS: dict[str, Any] = {
    "dataset": None,
    "dataset_format": "sharegpt",
    "dataset_column": None,
    "min_prompt_tokens": None,
    "max_prompt_tokens": None,
    "source_output_lengths": True,
    "multi_turn": False,
    "think_time_s": 0.0,
    "prefix_count": None,
    "prefix_tokens": None,
    "trace": None,
    "trace_format": "mooncake",
    "time_scale": 1.0,
    "trace_start_s": 0.0,
    "trace_duration_s": None,
    "strict_lengths": False,
    "cancel_rate": 0.0,
    "cancel_after_ms": None,
    "source_sha256": None,
}


# The traffic fields in words with their units (engine.spec.forms.LABELS includes them).
TRAFFIC_LABELS: dict[str, str] = {
    "dataset": "Dataset (file, folder or hf:ID[:SPLIT])",
    "dataset_format": "Dataset format",
    "dataset_column": "Dataset column (text format)",
    "min_prompt_tokens": "Shortest prompt kept (tokens)",
    "max_prompt_tokens": "Longest prompt kept (tokens)",
    "source_output_lengths": "Output lengths from the dataset or trace",
    "multi_turn": "Multi-turn sessions (real replies carried)",
    "think_time_s": "Think time between turns (s, mean)",
    "prefix_count": "Shared prefixes (how many)",
    "prefix_tokens": "Shared prefix length (tokens)",
    "trace": "Trace file (its own schedule)",
    "trace_format": "Trace format",
    "time_scale": "Trace speed-up (x)",
    "trace_start_s": "Trace window start (s)",
    "trace_duration_s": "Trace window length (s)",
    "strict_lengths": "Refuse prompts beyond the context (else clip)",
    "cancel_rate": "Cancelled share (0-1)",
    "cancel_after_ms": "Cancel after (ms)",
    "source_sha256": "Input file hash (SHA-256)",
}


class TrafficFields(_Strict):
    """Where a workload's requests come from, beyond synthetic lengths and a prompt file."""

    dataset: str | None = Field(
        default=None, max_length=4096, description="Dataset: a local file or folder, or hf:ID[:SPLIT]"
    )
    dataset_format: DatasetFormat = Field(
        default="sharegpt", description="Dataset format: sharegpt | openai-chat | text"
    )
    dataset_column: str | None = Field(default=None, max_length=200, description="Dataset (text format): the column")
    min_prompt_tokens: int | None = Field(default=None, ge=1, le=1_000_000, description="Dataset: shortest prompt kept")
    max_prompt_tokens: int | None = Field(default=None, ge=1, le=1_000_000, description="Dataset: longest prompt kept")
    source_output_lengths: bool = Field(
        default=True,
        description="Output lengths from the dataset's replies or the trace (off: output_tokens for every request)",
    )
    multi_turn: bool = Field(
        default=False, description="Dataset: send each conversation's user turns as a session, with the real replies"
    )
    think_time_s: float = Field(
        default=0.0, ge=0, le=3600, description="Sessions: mean seconds between a reply and the next turn"
    )
    prefix_count: int | None = Field(default=None, ge=1, le=100_000, description="Shared prefixes: how many")
    prefix_tokens: int | None = Field(default=None, ge=1, le=1_000_000, description="Shared prefixes: tokens each")
    trace: str | None = Field(default=None, max_length=4096, description="Trace file replayed on its own schedule")
    trace_format: TraceFormat = Field(default="mooncake", description="Trace format: mooncake | azure | burstgpt")
    time_scale: float = Field(default=1.0, gt=0, le=10_000, description="Trace: speed-up (2 = twice as fast)")
    trace_start_s: float = Field(default=0.0, ge=0, le=1e9, description="Trace window: first second replayed")
    trace_duration_s: float | None = Field(
        default=None, gt=0, le=1e9, description="Trace window: seconds replayed (empty: to the end)"
    )
    strict_lengths: bool = Field(
        default=False, description="Refuse prompts longer than the model's context instead of clipping them"
    )
    cancel_rate: float = Field(default=0.0, ge=0, le=1, description="Share of requests cancelled (connection closed)")
    cancel_after_ms: float | None = Field(
        default=None, gt=0, le=86_400_000, description="Cancelled requests: ms after their send"
    )
    source_sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$", description="The input file's content hash (set when queued)"
    )

    def traffic_problems(self, prompt_tokens: int | None, prompt_file: str | None, arrival: str) -> list[str]:
        """What contradicts itself among the traffic fields (pure)."""
        given = [n for n, v in (("prompt_file", prompt_file), ("dataset", self.dataset), ("trace", self.trace)) if v]
        problems = [f"give one source of prompts, not {' and '.join(given)}"] if len(given) > 1 else []
        if (self.dataset or self.trace) and prompt_tokens is not None:
            problems.append(
                f"prompt_tokens sets synthetic prompts; a {'dataset' if self.dataset else 'trace'} has its own"
            )
        problems += _dependent_problems(self, prompt_file)
        if self.trace and arrival not in ("batch", "max"):
            problems.append("a trace is sent on its own schedule; drop the arrival process (arrival, rate)")
        if self.multi_turn and self.dataset_format == "text":
            problems.append("multi_turn needs conversations (sharegpt or openai-chat), not a text column")
        if self.dataset_format == "text" and self.dataset and not self.dataset_column:
            problems.append("dataset_format=text needs dataset_column (the column holding the prompts)")
        lo, hi = self.min_prompt_tokens, self.max_prompt_tokens
        if lo is not None and hi is not None and lo > hi:
            problems.append("min_prompt_tokens must not exceed max_prompt_tokens")
        if (self.prefix_count is None) != (self.prefix_tokens is None):
            problems.append("shared prefixes need both prefix_count and prefix_tokens")
        if (self.cancel_rate > 0) != (self.cancel_after_ms is not None):
            problems.append("cancellations need both cancel_rate (> 0) and cancel_after_ms")
        return problems


_NEEDS: tuple[tuple[str, str], ...] = (
    ("dataset_format", "dataset"),
    ("dataset_column", "dataset"),
    ("min_prompt_tokens", "dataset"),
    ("max_prompt_tokens", "dataset"),
    ("multi_turn", "dataset"),
    ("trace_format", "trace"),
    ("time_scale", "trace"),
    ("trace_start_s", "trace"),
    ("trace_duration_s", "trace"),
)


def _dependent_problems(t: TrafficFields, prompt_file: str | None) -> list[str]:
    """A field set away from its default where nothing reads it (it would change the fingerprint only)."""
    out = [
        f"{knob} is only used with {parent}"
        for knob, parent in _NEEDS
        if getattr(t, knob) != TRAFFIC_DEFAULTS[knob] and not getattr(t, parent)
    ]
    if t.think_time_s != 0.0 and not t.multi_turn:
        out.append("think_time_s is only used with multi_turn")
    if t.source_sha256 is not None and not (t.dataset or t.trace or prompt_file):
        out.append("source_sha256 is only used with a prompt file, a dataset or a trace")
    if not t.source_output_lengths and not (t.dataset or t.trace):
        out.append("source_output_lengths is only used with a dataset or a trace")
    return out
