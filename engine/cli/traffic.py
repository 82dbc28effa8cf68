"""The traffic options of run, submit and sweep: datasets, multi-turn sessions, shared prefixes, trace
replay and cancellations (the workload fields of :mod:`engine.spec.traffic`)."""

from __future__ import annotations

import argparse
from typing import Any

from engine.cli.values import finite_float, int_arg
from engine.spec import SpecError

_OPTIONS = (
    "dataset",
    "dataset_format",
    "dataset_column",
    "min_prompt_tokens",
    "max_prompt_tokens",
    "think_time_s",
    "prefix_count",
    "prefix_tokens",
    "trace",
    "trace_format",
    "time_scale",
    "cancel_rate",
    "cancel_after_ms",
)


def add_traffic_arguments(p: argparse.ArgumentParser) -> None:
    """The traffic options (engine/run/sources): where the requests come from, beyond synthetic lengths."""
    d = p.add_argument_group("traffic like production (engine/run/sources)")
    d.add_argument("--dataset", metavar="PATH|hf:ID[:SPLIT]", help="conversations or prompts of a dataset")
    d.add_argument("--dataset-format", help="sharegpt (default) | openai-chat | text")
    d.add_argument("--dataset-column", metavar="NAME", help="text format: the column of prompts")
    d.add_argument("--min-prompt-tokens", type=int_arg, metavar="N", help="dataset: keep prompts of >= N tokens")
    d.add_argument("--max-prompt-tokens", type=int_arg, metavar="N", help="dataset: keep prompts of <= N tokens")
    d.add_argument("--multi-turn", action="store_true", help="dataset: sessions of turns carrying the real replies")
    d.add_argument("--think-time-s", type=finite_float, metavar="S", help="sessions: mean pause before a turn")
    d.add_argument("--prefix-count", type=int_arg, metavar="K", help="shared prefixes: K system prompts ...")
    d.add_argument("--prefix-tokens", type=int_arg, metavar="N", help="... of N tokens, one per request")
    d.add_argument("--trace", metavar="PATH", help="a trace replayed on its own schedule")
    d.add_argument("--trace-format", help="mooncake (default) | azure | burstgpt")
    d.add_argument("--time-scale", type=finite_float, metavar="X", help="trace: X times as fast (default 1)")
    d.add_argument("--trace-window", metavar="START:DURATION", help="trace: seconds replayed, e.g. 600:300")
    d.add_argument("--strict", action="store_true", help="refuse prompts beyond the context (default: clip)")
    d.add_argument("--cancel-rate", type=finite_float, metavar="F", help="share of requests cancelled (0..1) ...")
    d.add_argument("--cancel-after-ms", type=finite_float, metavar="MS", help="... this long after their send")


def trace_window(text: str) -> tuple[float, float | None]:
    """``START:DURATION`` (``START:`` for the rest of the trace) as seconds."""
    start, sep, duration = text.partition(":")
    try:
        return float(start or 0), (float(duration) if duration.strip() else None)
    except ValueError:
        raise SpecError(f"--trace-window {text[:40]!r} is not START:DURATION in seconds, e.g. 600:300") from None


def traffic_from_args(args: argparse.Namespace, workload: dict[str, Any]) -> dict[str, Any]:
    """``workload`` with the traffic options given (a dataset or a trace replaces synthetic lengths)."""
    workload.update({k: getattr(args, k) for k in _OPTIONS if getattr(args, k, None) is not None})
    if getattr(args, "multi_turn", False):
        workload["multi_turn"] = True
    if getattr(args, "strict", False):
        workload["strict_lengths"] = True
    if getattr(args, "trace_window", None):
        workload["trace_start_s"], workload["trace_duration_s"] = trace_window(args.trace_window)
    if workload.get("dataset") or workload.get("trace"):
        if getattr(args, "prompt_tokens", None) is None:
            workload.pop("prompt_tokens", None)  # the source brings its prompts
        if getattr(args, "output_tokens", None) is not None:
            workload["source_output_lengths"] = False  # --output-tokens N fixes every request's length
    return workload  # a trace without --requests is replayed whole (the workload's own default)
