"""Secrets never reach text that leaves a process: one scrubber for every error, log line and stored field.

A process registers each secret it reads (:func:`register`; the OpenAI backend its API key,
a worker and a job process the key variables a job's spec names, :func:`register_spec`).
:func:`scrub` replaces every registered value, and any ``Bearer <token>`` or
``Authorization: <value>`` / ``api-key: <value>`` pattern, by ``[redacted]``. Storage
passes every error, log tail, progress note, provenance and quality text through it;
the job process wraps its stdout and stderr in :class:`ScrubbedStream`.
"""

from __future__ import annotations

import io
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4  # shorter values would blank ordinary words

_lock = threading.Lock()
_known: set[str] = set()

_BEARER = re.compile(r"(?i)(?<![A-Za-z0-9])(bearer)(\s+|%20)(?!\[redacted\])[^\s\"'<>,;\\]+")
_SEP = r"(\\?[\"']?\s*[:=]\s*\\?[\"']?)"  # ": ", "=", '": "' and their JSON-escaped forms
_TOKEN = r"(?!\[redacted\])[^\s\"'<>,;\\]+"
# Authorization values are "<scheme> <credentials>" (the Bearer scheme is handled above); api keys one token.
_AUTHORIZATION = re.compile(
    r"(?i)(?<![A-Za-z0-9])((?:proxy-)?authorization)" + _SEP + r"(?!bearer\s)(?:\w+\s+)?" + _TOKEN
)
_API_KEY = re.compile(r"(?i)(?<![A-Za-z0-9])(x-api-key|api[-_]key)" + _SEP + _TOKEN)


def register(value: str | None) -> None:
    """Remember a secret value of this process so :func:`scrub` removes it everywhere."""
    if value and len(value.strip()) >= MIN_SECRET_CHARS:
        with _lock:
            _known.add(value.strip())


def register_env(names: Iterable[str | None]) -> None:
    """Register the values of the environment variables ``names`` (unset ones are skipped)."""
    for name in names:
        if name:
            register(os.environ.get(name))


def secret_env_names(spec: JSONMapping | None) -> list[str]:
    """The environment variables holding secrets that a job spec (as a dict) names: its API key variable."""
    recipe = (spec or {}).get("recipe") or {}
    name = recipe.get("api_key_env") if isinstance(recipe, Mapping) else None
    return [name] if isinstance(name, str) and name else []


def register_spec(spec: JSONMapping | None) -> None:
    """Register the secrets a job spec's variables hold in this process's environment."""
    register_env(secret_env_names(spec))


def _cut_ends(text: str, value: str) -> str:
    """A secret cut by an earlier truncation: its start ending the text, or its end starting it."""
    for n in range(min(len(value), len(text)) - 1, MIN_SECRET_CHARS - 1, -1):
        if text.endswith(value[:n]):
            text = text[:-n] + REDACTED
            break
    for n in range(min(len(value), len(text)) - 1, MIN_SECRET_CHARS - 1, -1):
        if text.startswith(value[-n:]):
            return REDACTED + text[n:]
    return text


def scrub(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """``text`` without any registered or given secret, bearer token or authorization value."""
    if not text:
        return text
    with _lock:
        values = set(_known)
    values.update(s.strip() for s in secrets if s and len(s.strip()) >= MIN_SECRET_CHARS)
    for value in sorted(values, key=len, reverse=True):
        text = _cut_ends(text.replace(value, REDACTED), value)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    for pattern in (_AUTHORIZATION, _API_KEY):
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return text


class ScrubbedStream(io.TextIOBase):
    """A text stream that scrubs every write before passing it on (for stdout/stderr)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text) or "")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")
