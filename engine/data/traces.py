"""Traces of production traffic as rows to replay on the trace's own schedule.

:func:`read_trace` reads a Mooncake, Azure or BurstGPT trace (:mod:`engine.data.trace_formats`)
a row at a time into :class:`TraceRow` values whose ``at_s`` counts seconds from the trace's
first row (a skipped row included: seconds of the trace are those a reader of the file sees).
Timestamps must not decrease; rows the trace marks as failed, or that have nothing to send,
are skipped and counted in ``Trace.skipped``. Only the rows of the requested window (and at
most ``max_rows`` of them) are kept, so a trace of gigabytes costs the memory of the rows
replayed; reading stops at the window's end or the row cap. :func:`scan_trace` reads the whole file
through before anything loads (every row checked, the window's rows counted, the largest gap).
``content_hash`` is the sha256 of the whole file, for the run's fingerprint.

:func:`window` and :func:`time_scale` are the same cuts as pure functions over rows.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.data.reading import content_hash, existing_file, problem, shown
from engine.data.trace_formats import FORMATS, Entry, TraceFormat
from engine.spec import SpecError


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace: when it is due (seconds from the trace's first row, or from the
    window's start), its lengths in tokens, its prefix block ids (Mooncake) and its place."""

    at_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None
    where: str


@dataclass(frozen=True)
class Trace:
    """The rows of a trace to replay, the rows left out by reason, and the file's sha256."""

    rows: list[TraceRow]
    skipped: dict[str, int] = field(default_factory=dict)
    content_hash: str = ""
    window_rows: int = 0  # rows due in the window, the row cap aside
    window_span_s: float = 0.0  # the due time of the window's last row


def trace_format(fmt: str) -> TraceFormat:
    """The trace format named ``fmt``."""
    if fmt not in FORMATS:
        raise SpecError(f"trace format {shown(fmt)} is not one of {', '.join(FORMATS)}")
    return FORMATS[fmt]


def _timed(spec: TraceFormat, file: Path, skipped: dict[str, int]) -> Iterator[tuple[Entry, float]]:
    """Every row to replay with its seconds from the trace's first row (a skipped row counts there too), the
    file read to its end; skipped rows counted by reason; timestamps out of order fail in one line."""
    first: Entry | None = None
    before: Entry | None = None
    for entry in spec.entries(file):
        if before is None:
            first = entry
        elif entry.time < before.time:
            raise _out_of_order(spec, before, entry)
        before = entry
        if entry.skip:
            skipped[entry.skip] = skipped.get(entry.skip, 0) + 1
            continue
        assert first is not None
        yield entry, (entry.time - first.time) * spec.seconds_per_unit
    if first is None:
        raise SpecError(f"trace {file} holds no rows")


def read_trace(
    path: Path | str,
    fmt: str,
    *,
    start_s: float = 0.0,
    duration_s: float | None = None,
    max_rows: int | None = None,
) -> Trace:
    """The rows of the trace file ``path`` in format ``fmt`` (mooncake, azure, burstgpt).

    With ``start_s``/``duration_s`` only the rows due in [start_s, start_s + duration_s) seconds
    of the trace are kept, re-based so that the window starts at 0 (as :func:`window`);
    ``max_rows`` keeps that many rows (the window's others are counted: ``window_rows``). A malformed row, a negative or
    fractional length, timestamps out of order, an empty file, a missing column or a byte that
    is not UTF-8 fails in one line naming the file, the line and the field (the whole file is checked
    before any model loads by :func:`scan_trace`).
    """
    spec = trace_format(fmt)
    _check_window(start_s, duration_s)
    if max_rows is not None and max_rows < 1:
        raise SpecError(f"a trace's row cap must be at least 1, not {max_rows}")
    file = existing_file(path, "trace")
    end_s = math.inf if duration_s is None else start_s + duration_s
    rows: list[TraceRow] = []
    skipped: dict[str, int] = {}
    in_window, span = 0, 0.0
    for entry, at_s in _timed(spec, file, skipped):
        if at_s >= end_s:
            break
        if at_s < start_s:
            continue
        in_window, span = in_window + 1, at_s - start_s  # past the cap: counted, so a run says what it left out
        if max_rows is None or len(rows) < max_rows:
            rows.append(TraceRow(at_s - start_s, entry.input_tokens, entry.output_tokens, entry.hash_ids, entry.where))
    if not rows:
        raise SpecError(_nothing_kept(file, skipped, start_s, duration_s))
    return Trace(rows, skipped, content_hash(file), in_window, span)


@dataclass
class TraceScan:
    """A whole trace file read through, before anything loads: every row of its window (due time and lengths, as
    compact arrays), the longest input, the largest gap between rows, what was skipped."""

    due_s: array = field(default_factory=lambda: array("d"))  # the window's rows, re-based to its start
    inputs: array = field(default_factory=lambda: array("q"))
    outputs: array = field(default_factory=lambda: array("q"))
    longest_input_where: str = ""
    gap_s: float = 0.0  # largest gap between consecutive rows of the window
    gap_where: str = ""
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.due_s)


def scan_trace(path: Path | str, fmt: str, *, start_s: float = 0.0, duration_s: float | None = None) -> TraceScan:
    """Read the whole trace (streamed; 24 bytes kept per row of the window) and say what a replay of its window
    would send; the same one-line errors as :func:`read_trace`, for any row of the file."""
    spec = trace_format(fmt)
    _check_window(start_s, duration_s)
    file = existing_file(path, "trace")
    end_s = math.inf if duration_s is None else start_s + duration_s
    out = TraceScan()
    longest = -1
    for entry, at_s in _timed(spec, file, out.skipped):
        if not start_s <= at_s < end_s:
            continue  # still read: every row of the file is checked
        due = at_s - start_s
        if out.due_s and due - out.due_s[-1] > out.gap_s:
            out.gap_s, out.gap_where = due - out.due_s[-1], entry.where
        out.due_s.append(due)
        out.inputs.append(entry.input_tokens)
        out.outputs.append(entry.output_tokens)
        if entry.input_tokens > longest:
            longest, out.longest_input_where = entry.input_tokens, entry.where
    if not out.rows:
        raise SpecError(_nothing_kept(file, out.skipped, start_s, duration_s))
    return out


def _out_of_order(spec: TraceFormat, before: Entry, entry: Entry) -> SpecError:
    back = (before.time - entry.time) * spec.seconds_per_unit
    what = f"{back:.6g} s earlier than the row before ({before.where}); a trace's timestamps must not decrease"
    return problem(entry.where, spec.time_field, what)


def _nothing_kept(file: Path, skipped: dict[str, int], start_s: float, duration_s: float | None) -> str:
    if skipped and not (start_s or duration_s is not None):
        reasons = ", ".join(f"{n} {why}" for why, n in skipped.items())
        return f"trace {file}: no row can be replayed ({reasons})"
    end = "the end" if duration_s is None else f"{start_s + duration_s:g} s"
    return f"trace {file}: no row is due between {start_s:g} s and {end} of the trace"


def _check_window(start_s: float, duration_s: float | None) -> None:
    if not math.isfinite(start_s) or start_s < 0:
        raise SpecError(f"a trace window starts at 0 s or later, not {start_s!r}")
    if duration_s is not None and (not math.isfinite(duration_s) or duration_s <= 0):
        raise SpecError(f"a trace window lasts more than 0 s, not {duration_s!r}")


def window(rows: Iterable[TraceRow], start_s: float, duration_s: float | None = None) -> list[TraceRow]:
    """The rows due in [start_s, start_s + duration_s) seconds of the trace (to its end without
    ``duration_s``), re-based so that the window's start is 0."""
    _check_window(start_s, duration_s)
    end_s = math.inf if duration_s is None else start_s + duration_s
    return [
        TraceRow(r.at_s - start_s, r.input_tokens, r.output_tokens, r.hash_ids, r.where)
        for r in rows
        if start_s <= r.at_s < end_s
    ]


def time_scale(rows: Iterable[TraceRow], x: float) -> list[TraceRow]:
    """The rows replayed ``x`` times as fast (x = 2: every due time halved)."""
    if not math.isfinite(x) or x <= 0:
        raise SpecError(f"a trace's time scale must be a number above 0, not {x!r}")
    return [TraceRow(r.at_s / x, r.input_tokens, r.output_tokens, r.hash_ids, r.where) for r in rows]
