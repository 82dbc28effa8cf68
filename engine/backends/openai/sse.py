"""Server-sent events of an OpenAI-compatible streaming response, parsed after the reads were stamped.

The HTTP client (:mod:`engine.backends.openai.http`) keeps each network read as ``(stamp, bytes)``;
:meth:`EventStream.parse` turns them into the record's chunks afterwards (when the response is
over, or cut short), in one cheap pass: each SSE line is stamped with the read that completed it,
exactly as if it had been parsed as it arrived. Each completions chunk with choices (each chat
chunk with content) is one token-bearing chunk, as in vLLM's ``bench serve``; ``usage`` is kept for
the token count. Anything that is not a well-formed SSE stream ends the request with a
:class:`RequestFailed` reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from engine.backends.base import RequestError
from engine.backends.openai.served import REFUSED, refused_for_length
from engine.jsonvalue import JSONObject
from engine.measure.records import RequestRecord
from engine.secrets import scrub

try:  # orjson parses a chunk several times faster than json
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    _loads = json.loads


class RequestFailed(RequestError):
    """One request failed (connection, HTTP status, timeout, malformed or cut stream); the message is its reason.

    The reason is scrubbed of the API key and any bearer token (a server may echo the request's headers).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(scrub(reason))


def _clip(raw: bytes, n: int = 80) -> str:
    """The start of a bad line, scrubbed before it is cut (a cut secret would no longer match)."""
    return repr((scrub(raw.decode(errors="replace")) or "")[:n])


_SSE_FIELDS = (b":", b"event:", b"id:", b"retry:")


class EventStream:
    """Reads one response's server-sent events: a stamp per token-bearing chunk, text, usage."""

    __slots__ = ("chunk_ns", "chunk_tokens", "texts", "usage", "done", "chat")

    def __init__(self, record: RequestRecord, chat: bool) -> None:
        self.chunk_ns = record.chunk_ns
        self.chunk_tokens = record.chunk_tokens
        self.texts: list[str] = []
        self.usage: JSONObject | None = None
        self.done = False
        self.chat = chat

    def parse(self, reads: Iterable[tuple[int, bytes]]) -> None:
        """The body's reads, in order, each ``(stamp, bytes)``: every line stamped by the read that completed it;
        stops at ``[DONE]``. (A ``data:`` line is read here, in the loop: this runs once per token event.)"""
        pending = b""
        event_of = self._event
        for t, data in reads:
            lines = (pending + data).split(b"\n") if pending else data.split(b"\n")
            pending = lines.pop()
            for raw in lines:
                if not raw:  # events end with an empty line: nothing to read there
                    continue
                if raw[:5] != b"data:":
                    self._other(raw)
                    continue
                payload = raw[5:].strip()
                if payload == b"[DONE]":
                    self.done = True
                    return
                try:
                    event = _loads(payload)
                except ValueError as exc:
                    raise RequestFailed(f"malformed SSE data (not JSON): {_clip(payload)}") from exc
                if not isinstance(event, dict):
                    raise RequestFailed(f"malformed SSE data (not an object): {_clip(payload)}")
                event_of(event, t)
        if pending.strip() == b"data: [DONE]":
            self.done = True

    @staticmethod
    def _other(raw: bytes) -> None:
        """A line that is not ``data:``: a comment or another SSE field is fine, anything else is not."""
        raw = raw.strip()
        if raw and not raw.startswith(_SSE_FIELDS):
            raise RequestFailed(f"malformed SSE line: {_clip(raw)}")

    def _event(self, event: JSONObject, t: int) -> None:
        choices = event.get("choices")
        if choices:
            c0 = choices[0]
            if self.chat:  # the role-only first delta carries no token
                piece = (c0.get("delta") or {}).get("content") or None
            else:  # as vLLM's bench serve: every choices chunk holds a token (text may be empty)
                piece = c0.get("text") or ""
            if piece is not None:
                self.chunk_ns.append(t)
                self.chunk_tokens.append(1)
                self.texts.append(piece)
        elif "error" in event:
            err = event["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            raise RequestFailed(f"server error in stream: {msg}")
        if event.get("usage"):
            self.usage = event["usage"]


def http_reason(status: int, text: str) -> str:
    """``HTTP 404: <the server's message>`` in one line; a prompt beyond the server's context is said so first
    (``refused by the server: prompt beyond its context (HTTP 400: ...)``)."""
    msg = text.strip()
    try:
        data = json.loads(msg)
        err = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(err, dict):
            msg = str(err.get("message") or err.get("detail") or err)
        elif isinstance(data, dict) and "detail" in data:
            msg = str(data["detail"])
        else:
            msg = str(err)
    except ValueError:
        pass
    msg = " ".join((scrub(msg) or "").split())[:300]  # scrubbed before it is cut
    reason = f"HTTP {status}: {msg}" if msg else f"HTTP {status}"
    return f"{REFUSED} ({reason})" if refused_for_length(status, msg) else reason
