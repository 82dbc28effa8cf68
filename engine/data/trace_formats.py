"""The published trace formats, row by row: Mooncake JSONL, the Azure LLM inference trace CSV
and BurstGPT CSV. Each format turns a file into :class:`Entry` values (its own time unit,
lengths checked); :mod:`engine.data.traces` orders, windows and re-bases them.

- ``mooncake``: JSON lines ``{"timestamp": ms, "input_length": n, "output_length": n,
  "hash_ids": [...]}``, one hash id per 512-token block of the input (requests with equal
  leading ids share those blocks' tokens); ``hash_ids`` may be absent.
- ``azure``: CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``, the timestamp a date-time such as
  ``2023-11-16 18:15:46.6805900`` (up to 9 fraction digits kept exactly; an optional UTC
  offset).
- ``burstgpt``: CSV ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``,
  the timestamp in seconds; a row with 0 response tokens is a request that failed in the
  trace, skipped and counted.

A row with 0 input tokens (or, outside BurstGPT, 0 output tokens) cannot be replayed: it is
skipped and counted too. A negative or fractional length, a timestamp that is not one, or a
``hash_ids`` list that does not hold one non-negative integer per 512-token block fails with
its line and field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from engine.data.reading import csv_rows, json_lines, kind_of, line_place, problem, shown

MOONCAKE_BLOCK_TOKENS = 512
NO_INPUT = "0 input tokens"
NO_OUTPUT = "0 output tokens"
FAILED_IN_TRACE = "failed in the trace (0 response tokens)"
_MISSING = object()
_AZURE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?", re.ASCII)


@dataclass(frozen=True, slots=True)
class Entry:
    """One row of a trace file: its time in the format's unit, lengths, hash ids, and why it is
    left out (``skip``: a reason counted in ``Trace.skipped``), if it is."""

    where: str
    time: int | float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None
    skip: str | None


@dataclass(frozen=True)
class TraceFormat:
    """A trace format: the field of its timestamps, their unit in seconds, and its reader."""

    name: str
    time_field: str
    seconds_per_unit: float
    entries: Callable[[Path], Iterator[Entry]]


def count(where: str, field: str, value: object) -> int:
    """A token count: a whole number >= 0 (a JSON integer or integral float, or CSV text)."""
    if type(value) is int and value >= 0:  # the common cases first: a JSON integer, CSV digits
        return value
    if type(value) is str and value.isascii() and value.isdigit():
        return int(value)
    if value is _MISSING or value is None or (isinstance(value, str) and not value.strip()):
        raise problem(where, field, "missing")
    number = _as_number(where, field, value)
    if isinstance(number, float) and not number.is_integer():
        raise problem(where, field, f"{shown(value)} is not a whole number of tokens")
    if number < 0:
        raise problem(where, field, f"{shown(value)} is negative")
    return int(number)


def timestamp(where: str, field: str, value: object) -> float:
    """A finite number (a JSON number or CSV text)."""
    if type(value) is int:
        return value
    if type(value) is str and value.isascii() and value.isdigit():
        return int(value)
    if value is _MISSING or value is None or (isinstance(value, str) and not value.strip()):
        raise problem(where, field, "missing")
    return _as_number(where, field, value)


def _as_number(where: str, field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise problem(where, field, f"{shown(value)} is not a number")
    if isinstance(value, str):
        try:
            value = int(value) if value.strip().lstrip("+-").isdigit() else float(value)
        except ValueError as exc:
            raise problem(where, field, f"{shown(value)} is not a number") from exc
    if not math.isfinite(value):
        raise problem(where, field, f"{shown(value)} is not a finite number")
    return value


def azure_time_ns(where: str, field: str, text: str) -> int:
    """An Azure trace's date-time as integer nanoseconds since 1970 (UTC unless it says otherwise)."""
    match = _AZURE_TIME.fullmatch(text.strip())
    if not match:
        raise problem(where, field, f"{shown(text)} is not a date-time like '2023-11-16 18:15:46.6805900'")
    base, fraction, zone = match.groups()
    seconds = _epoch_seconds(base, zone)
    if seconds is None:
        raise problem(where, field, f"{shown(text)} is not a valid date-time")
    return seconds * 1_000_000_000 + int((fraction or "0").ljust(9, "0"))


@lru_cache(maxsize=4096)
def _epoch_seconds(base: str, zone: str | None) -> int | None:
    """Whole seconds since 1970 of a date-time without its fraction (rows of a second share it)."""
    try:
        moment = datetime.fromisoformat(base + (zone or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def _skip(input_tokens: int, output_tokens: int, no_output: str) -> str | None:
    if output_tokens == 0:
        return no_output
    return NO_INPUT if input_tokens == 0 else None


def _hash_ids(where: str, value: object, input_tokens: int) -> tuple[int, ...] | None:
    if value is _MISSING or value is None:
        return None
    if not isinstance(value, list) or (value and (set(map(type, value)) != {int} or min(value) < 0)):
        raise problem(where, "hash_ids", f"must be a list of non-negative integers, not {shown(value)}")
    blocks = -(-input_tokens // MOONCAKE_BLOCK_TOKENS)
    if len(value) != blocks:
        raise problem(
            where,
            "hash_ids",
            f"{len(value)} ids for {input_tokens} input tokens; one per {MOONCAKE_BLOCK_TOKENS}-token block is {blocks}",
        )
    return tuple(value)


def mooncake_entries(path: Path) -> Iterator[Entry]:
    """The rows of a Mooncake JSONL trace (timestamps in ms)."""
    for line, value in json_lines(path):
        where = line_place(path, line)
        if not isinstance(value, dict):
            raise problem(where, None, f"a row must be a JSON object, not {kind_of(value)}")
        at = timestamp(where, "timestamp", value.get("timestamp", _MISSING))
        prompt = count(where, "input_length", value.get("input_length", _MISSING))
        output = count(where, "output_length", value.get("output_length", _MISSING))
        ids = _hash_ids(where, value.get("hash_ids", _MISSING), prompt)
        yield Entry(where, at, prompt, output, ids, _skip(prompt, output, NO_OUTPUT))


def azure_entries(path: Path) -> Iterator[Entry]:
    """The rows of an Azure LLM inference trace CSV (timestamps as integer ns)."""
    for line, (stamp, context, generated) in csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        where = line_place(path, line)
        at = azure_time_ns(where, "TIMESTAMP", stamp)
        prompt = count(where, "ContextTokens", context)
        output = count(where, "GeneratedTokens", generated)
        yield Entry(where, at, prompt, output, None, _skip(prompt, output, NO_OUTPUT))


def burstgpt_entries(path: Path) -> Iterator[Entry]:
    """The rows of a BurstGPT CSV (timestamps in s); 0 response tokens is a failure in the trace."""
    for line, (stamp, request, response) in csv_rows(path, ("Timestamp", "Request tokens", "Response tokens")):
        where = line_place(path, line)
        at = timestamp(where, "Timestamp", stamp)
        prompt = count(where, "Request tokens", request)
        output = count(where, "Response tokens", response)
        yield Entry(where, at, prompt, output, None, _skip(prompt, output, FAILED_IN_TRACE))


FORMATS: dict[str, TraceFormat] = {
    "mooncake": TraceFormat("mooncake", "timestamp", 1e-3, mooncake_entries),
    "azure": TraceFormat("azure", "TIMESTAMP", 1e-9, azure_entries),
    "burstgpt": TraceFormat("burstgpt", "Timestamp", 1.0, burstgpt_entries),
}
