"""Pure readers of command-line values: whole numbers the database can store, one-line
messages, and ``--spec`` files (bounded size and depth, UTF-8, one JSON object)."""

from __future__ import annotations

import argparse
import json
import math
import re
from typing import TYPE_CHECKING

from engine.spec import SpecError
from engine.spec.text import QUOTED_CHARS, checked_name, quoted

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping, JSONObject

MAX_INT = 2**63 - 1  # the largest id or count the databases store (SQLite and PostgreSQL BIGINT)
_WHOLE = re.compile(r"[+-]?[0-9]+")  # ASCII digits only (int() also takes "٣", "１" and "1_0")


def whole_number(text: str, *, low: int = -MAX_INT, high: int = MAX_INT) -> int:
    """``text`` as a whole number in ``[low, high]``; ValueError with one line otherwise."""
    stripped = text.strip()
    if not _WHOLE.fullmatch(stripped):
        raise ValueError(f"{shown(text)} is not a whole number (digits 0-9)")
    value = int(stripped) if len(stripped) <= 20 else None  # longer ones are out of range anyway
    if value is None or not low <= value <= high:
        raise ValueError(f"{shown(stripped)} is out of range ({low}..{high})")
    return value


def shown(text: str, most: int = QUOTED_CHARS) -> str:
    """``text`` quoted for a one-line message, cut to ``most`` characters (:func:`engine.spec.text.quoted`)."""
    return quoted(text, most)


def name_text(text: str) -> str:
    """An argparse type: a name (``--sweep``) of printable text, at most 200 characters, said so otherwise."""
    import argparse

    try:
        return checked_name(text, "the name") or text
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def one_line(text: str) -> str:
    """``text`` on one line: its lines joined with spaces."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


MAX_SPEC_BYTES = 1_000_000
MAX_SPEC_DEPTH = 32  # a job spec nests four levels; deeper JSON is not a spec (and could exhaust the stack)


def read_spec_file(path: str | None) -> JSONObject:
    """The JSON object of ``--spec FILE``; SpecError with one line for anything else."""
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read spec file {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(
            f"spec file {path} is larger than {MAX_SPEC_BYTES // 1000} kB; a job spec is a small JSON object"
        )
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise SpecError(f"spec file {path} is not UTF-8 text (byte {exc.start}); it must hold a JSON object") from exc
    except json.JSONDecodeError as exc:
        raise SpecError(f"spec file {path} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise SpecError(f"spec file {path} nests deeper than {MAX_SPEC_DEPTH} levels; it is not a job spec") from exc
    if not isinstance(data, dict):
        raise SpecError(f"spec file {path} must hold a JSON object")
    if depth(data) > MAX_SPEC_DEPTH:
        raise SpecError(f"spec file {path} nests deeper than {MAX_SPEC_DEPTH} levels; it is not a job spec")
    return data


def depth(value: object) -> int:
    """How deeply lists and objects nest in ``value`` (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def spec_section(data: JSONMapping, key: str, example: str) -> JSONObject:
    """A copy of the spec file's ``key`` object; SpecError when it is there but not an object."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{key}: must be a JSON object, e.g. {example}, not {type(value).__name__} {shown(str(value))}")
    return dict(value)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (and at most :data:`MAX_INT`)."""
    try:
        return whole_number(text, low=1)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def int_arg(text: str) -> int:
    """An argparse type: a whole number in ASCII digits that the database can store."""
    try:
        return whole_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def finite_float(text: str) -> float:
    """An argparse type: a finite number (no nan, inf, or 1e999)."""
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a number") from exc
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a finite number")
    return value
