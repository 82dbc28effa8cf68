"""Users' text in specs and messages (pure): names capped and printable, and input quoted by a short prefix.

A name (a job's, a sweep's) is at most :data:`MAX_NAME` characters of printable text: control
characters (ESC, BEL, newlines ...) would reach terminals, logs and pages as they are. A message
that quotes what a user typed quotes at most :data:`QUOTED_CHARS` characters of it
(:func:`quoted`), so a 100,000-character value never becomes a 100 kB line.
"""

from __future__ import annotations

import unicodedata

from engine.jsonvalue import JSONScalar

MAX_NAME = 200  # characters of a job, run or sweep name
QUOTED_CHARS = 40  # characters of a user's value quoted in a message


def quoted(value: object, most: int = QUOTED_CHARS) -> str:
    """``value`` quoted for a one-line message (its ``repr``), cut to ``most`` characters and said so."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= most:
        return repr(text) if isinstance(value, str) else text
    return f"{text[:most]!r}... ({len(text):,} characters)"


def control_characters(text: str) -> list[str]:
    """The control and format characters in ``text`` (``\\x1b``, ``\\x07``, ``\\u202e`` ...), each once."""
    found = [c for c in text if unicodedata.category(c) in ("Cc", "Cf")]
    return list(dict.fromkeys(found))


def name_problem(value: str, what: str = "name", most: int = MAX_NAME) -> str | None:
    """Why ``value`` cannot be a name (too long, control characters), naming the cap; None when it can."""
    if len(value) > most:
        return f"{what} is {len(value):,} characters long; at most {most} are allowed ({quoted(value)})"
    bad = control_characters(value)
    if bad:
        shown = ", ".join(repr(c) for c in bad[:4])
        return f"{what} holds control characters ({shown}); use printable text ({quoted(value)})"
    return None


def checked_name(value: str | None, what: str = "name", most: int = MAX_NAME) -> str | None:
    """``value`` stripped, or None when empty; ValueError (one line, the cap named) when it is no name."""
    if value is None:
        return None
    problem = name_problem(value, what, most)
    if problem:
        raise ValueError(problem)
    return value.strip() or None


def knob_value(text: str) -> JSONScalar:
    """A knob's value as a user typed it (``--knob NAME=VALUE``, a variant): none/null, true/yes, false/no, else the
    text; the recipe's types validate it afterwards."""
    lowered = text.strip().lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    return text.strip()
