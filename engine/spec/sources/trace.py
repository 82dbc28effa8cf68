"""The ``trace`` source: a production trace (Mooncake JSONL, Azure LLM inference CSV, BurstGPT CSV) replayed on
its own schedule, optionally a window of it and faster. Planned by :mod:`engine.run.sources.trace`."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from engine.jsonvalue import JSONObject
from engine.spec.sources.base import FILE_LABELS, ExtraFlag, FileInput, OutputLengths, TrafficSource, base_name

if TYPE_CHECKING:
    from engine.spec.workload import Workload

TraceFormat = Literal["mooncake", "azure", "burstgpt"]
TRACE_ROWS_CAP = 1_000_000  # a trace without ``requests``: every row of its window, at most this many


def _scale(text: str | bool) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"--length-scale {str(text)[:40]!r} is not a number, e.g. 0.1") from None
    if not 0 < value <= 100:
        raise ValueError(f"--length-scale {value:g}: a scale above 0 and at most 100")
    return value


def trace_window(text: str | bool) -> JSONObject:
    """``START:DURATION`` (``START:`` for the rest of the trace) as the window's fields; ValueError in one line."""
    start, _, duration = str(text).partition(":")
    try:
        return {"trace_start_s": float(start or 0), "trace_duration_s": float(duration) if duration.strip() else None}
    except ValueError:
        raise ValueError(f"--trace-window {str(text)[:40]!r} is not START:DURATION in seconds, e.g. 600:300") from None


class TraceTraffic(TrafficSource, FileInput, OutputLengths):
    """A trace's rows, each due at its own time (scaled), with its own lengths."""

    source: Literal["trace"] = "trace"
    trace: str = Field(min_length=1, max_length=4096, description="Trace file replayed on its own schedule")
    trace_format: TraceFormat = Field(default="mooncake", description="Trace format: mooncake | azure | burstgpt")
    time_scale: float = Field(default=1.0, gt=0, le=10_000, description="Trace: speed-up (2 = twice as fast)")
    trace_start_s: float = Field(default=0.0, ge=0, le=1e9, description="Trace window: first second replayed")
    trace_duration_s: float | None = Field(
        default=None, gt=0, le=1e9, description="Trace window: seconds replayed (empty: to the end)"
    )
    input_scale: float = Field(
        default=1.0, gt=0, le=100, description="Trace: every prompt's length times this (its shared blocks too)"
    )
    output_scale: float = Field(default=1.0, gt=0, le=100, description="Trace: every output length times this")
    min_prompt_tokens: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Trace: rows with shorter prompts (after scaling) left out"
    )
    max_prompt_tokens: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Trace: rows with longer prompts (after scaling) left out"
    )

    label: ClassVar[str] = "trace replay"
    summary: ClassVar[str] = "Mooncake / Azure / BurstGPT, on the trace's own schedule"
    planner: ClassVar[str] = "engine.run.sources.trace:TraceSource"
    selected_by: ClassVar[tuple[str, ...]] = ("trace",)
    file_field: ClassVar[str | None] = "trace"
    scheduled: ClassVar[bool] = True
    legacy: ClassVar[bool] = True
    default_requests: ClassVar[int | None] = TRACE_ROWS_CAP
    labels: ClassVar[dict[str, str]] = {
        "trace": "Trace file (its own schedule)",
        "trace_format": "Trace format",
        "time_scale": "Trace speed-up (x)",
        "trace_start_s": "Trace window start (s)",
        "trace_duration_s": "Trace window length (s)",
        "input_scale": "Prompt length scale (x)",
        "output_scale": "Output length scale (x)",
        "min_prompt_tokens": "Shortest prompt kept (tokens, after scaling)",
        "max_prompt_tokens": "Longest prompt kept (tokens, after scaling)",
        **FILE_LABELS,
    }
    extra_flags: ClassVar[tuple[ExtraFlag, ...]] = (
        ExtraFlag("--trace-window", "trace: seconds replayed, e.g. 600:300", trace_window, "START:DURATION"),
        ExtraFlag(
            "--length-scale",
            "trace: every prompt and output length times X (shared blocks scale with them), e.g. 0.1",
            lambda x: {"input_scale": _scale(x), "output_scale": _scale(x)},
            "X",
        ),
    )

    def title(self) -> str:
        speed = f" ×{self.time_scale:g}" if self.time_scale != 1 else ""
        return f"trace {base_name(self.trace)}{speed}"

    def words(self) -> str:
        digest = f", sha256 {self.source_sha256[:12]}…" if self.source_sha256 else ""
        speed = f", {self.time_scale:g}x faster" if self.time_scale != 1 else ""
        end = f"{self.trace_start_s + self.trace_duration_s:g}" if self.trace_duration_s is not None else "end"
        window = f", seconds {self.trace_start_s:g} to {end}" if self.trace_start_s or self.trace_duration_s else ""
        return f"trace replay {base_name(self.trace)} ({self.trace_format}{digest}){speed}{window}{self.scale_words()}"

    def scale_words(self) -> str:
        """``, lengths ×0.1`` (or prompts and outputs apart), ``, prompts 100-4,000 tokens``: what changes lengths."""
        if self.input_scale == self.output_scale != 1:
            scale = f", lengths ×{self.input_scale:g}"
        else:
            scale = "".join(
                f", {what} ×{x:g}"
                for what, x in (("prompts", self.input_scale), ("outputs", self.output_scale))
                if x != 1
            )
        lo, hi = self.min_prompt_tokens, self.max_prompt_tokens
        kept = f", prompts {lo or 1:,}-{hi:,} tokens" if hi else (f", prompts from {lo:,} tokens" if lo else "")
        return scale + kept

    def problems(self, workload: Workload) -> list[str]:
        out = []
        if workload.arrival not in ("batch", "max"):
            out.append("a trace is sent on its own schedule; drop the arrival process (arrival, rate)")
        lo, hi = self.min_prompt_tokens, self.max_prompt_tokens
        if lo is not None and hi is not None and lo > hi:
            out.append("min_prompt_tokens must not exceed max_prompt_tokens")
        return out
