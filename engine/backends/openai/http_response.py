"""An HTTP/1.1 response as it arrives: status, headers, and the body as ``(read stamp, bytes)`` pieces.

:class:`Exchange` is fed each network read by its connection (:mod:`engine.backends.openai.http`)
and does only the framing needed to know where the body ends: the status line and headers once,
then ``Content-Length``, the chunk sizes of a chunked body, or the end of the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

_MAX_HEAD = 65_536  # bytes of status line and headers
_HEAD, _LENGTH, _CHUNKED, _UNTIL_CLOSE, _DONE = range(5)


class HttpError(Exception):
    """A request failed below HTTP: no connection, the connection lost, a malformed response."""


class Connection(Protocol):
    """One keep-alive connection an exchange travels on: the loop's transport (``http._Connection``) or a socket read
    with kernel stamps (:class:`~engine.backends.openai.kernel_stamps.StampedConnection`)."""

    closed: bool
    used: bool  # it carried an exchange already (a pooled connection the server may have closed meanwhile)
    exchange: Exchange | None

    def usable(self) -> bool: ...

    def send(self, ex: Exchange, data: bytes) -> None: ...

    def abort(self) -> None: ...


class Exchange:
    """One request and its response: status, headers and the body as ``(read stamp, bytes)`` pieces."""

    __slots__ = (
        "sent_ns",
        "status",
        "headers",
        "reads",
        "complete",
        "keep_alive",
        "head",
        "finished",
        "_mode",
        "_buf",
        "_left",
        "_skip",
        "_trailer",
        "_got_bytes",
        "conn",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sent_ns = 0
        self.status = 0
        self.headers: dict[str, str] = {}
        self.reads: list[tuple[int, bytes]] = []
        self.complete = False  # the body ended as its framing says (or at the close, for HTTP/1.0)
        self.keep_alive = False
        self.head: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[None] = loop.create_future()
        self._mode = _HEAD
        self._buf = b""
        self._left = 0
        self._skip = 0
        self._trailer = False
        self._got_bytes = False
        self.conn: Connection | None = None  # the connection it travels on

    @property
    def body(self) -> bytes:
        """The whole body received so far."""
        return b"".join(piece for _, piece in self.reads)

    def feed(self, t: int, data: bytes) -> bool:
        """One network read (stamped ``t``); True once the response is complete."""
        self._got_bytes = True
        mode = self._mode
        if mode == _CHUNKED:
            if not (self._left or self._skip or self._buf or self._trailer):  # the usual read: one whole chunk
                nl = data.find(b"\r\n")
                if 0 < nl < 9 and data.endswith(b"\r\n"):
                    try:
                        size = int(data[:nl], 16)
                    except ValueError:
                        size = -1
                    if size > 0 and len(data) == nl + size + 4:
                        self.reads.append((t, data[nl + 2 : -2]))
                        return False
            self._chunked(t, data)
        elif mode == _HEAD:
            self._head_bytes(t, data)
        elif mode == _LENGTH:
            self._length(t, data)
        elif mode == _UNTIL_CLOSE:
            self.reads.append((t, data))
        return self._mode == _DONE

    def _head_bytes(self, t: int, data: bytes) -> None:
        buf = self._buf + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise HttpError("malformed HTTP response: no end of headers")
            self._buf = buf
            return
        self._buf = b""
        lines = buf[:end].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        try:
            self.status = int(rest.split(" ", 1)[0])
        except ValueError as exc:
            raise HttpError(f"malformed HTTP status line: {lines[0][:80]!r}") from exc
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = buf[end + 4 :]
        if 100 <= self.status < 200:  # 100 Continue and friends: the real head follows
            if body:
                self._head_bytes(t, body)
            return
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self.keep_alive = version == "HTTP/1.1" and connection != "close" or connection == "keep-alive"
        self._start_body(headers)
        if not self.head.done():
            self.head.set_result(None)
        if body:
            self.feed(t, body)
        elif self._mode == _LENGTH and self._left == 0:
            self._finish()

    def _start_body(self, headers: Mapping[str, str]) -> None:
        if self.status in (204, 304):
            self._mode, self._left = _LENGTH, 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode = _CHUNKED
        elif "content-length" in headers:
            try:
                self._mode, self._left = _LENGTH, int(headers["content-length"])
            except ValueError as exc:
                raise HttpError(f"malformed Content-Length: {headers['content-length'][:40]!r}") from exc
        else:
            self._mode, self.keep_alive = _UNTIL_CLOSE, False
        if headers.get("content-encoding", "identity").lower() not in ("identity", ""):
            raise HttpError(f"compressed responses are not supported ({headers['content-encoding']})")

    def _length(self, t: int, data: bytes) -> None:
        left = self._left
        if len(data) > left:
            data, self.keep_alive = data[:left], False  # bytes beyond the body: do not reuse the connection
        self.reads.append((t, data))
        self._left = left - len(data)
        if self._left == 0:
            self._finish()

    def _chunked(self, t: int, data: bytes) -> None:
        """Any piece of a chunked body (``feed`` takes the usual one, a whole chunk, itself)."""
        pos, n = 0, len(data)
        while pos < n:
            if self._left:
                take = min(self._left, n - pos)
                self.reads.append((t, data if take == n else data[pos : pos + take]))
                pos += take
                self._left -= take
                if not self._left:
                    self._skip = 2  # the CRLF after the chunk's data
            elif self._skip:
                step = min(self._skip, n - pos)
                pos += step
                self._skip -= step
            else:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    self._buf += data[pos:]
                    return
                line, self._buf, pos = (self._buf + data[pos:nl]).strip(), b"", nl + 1
                if self._line(line):
                    return

    def _line(self, line: bytes) -> bool:
        """A chunk-size line, or a trailer line after the last chunk; True once the body is over."""
        if self._trailer:
            if not line:
                self._finish()
                return True
        elif line:
            self._chunk_size(line)
        return False

    def _chunk_size(self, line: bytes) -> None:
        try:
            size = int(line.split(b";", 1)[0], 16)
        except ValueError as exc:
            raise HttpError(f"malformed chunked body: {line[:40]!r}") from exc
        if size == 0:
            self._trailer = True
        self._left = size

    def _finish(self) -> None:
        self._mode, self.complete = _DONE, True
        if not self.finished.done():
            self.finished.set_result(None)

    def lost(self, exc: BaseException | None) -> None:
        """The connection closed: the end of an HTTP/1.0 body, else a body cut short."""
        if self._mode == _UNTIL_CLOSE:
            self._finish()
        self.keep_alive = False
        self.fail(Lost(exc, fresh=not self._got_bytes))

    def fail(self, err: HttpError) -> None:
        """End the exchange with ``err`` for whoever waits (nobody may: that is not worth a warning)."""
        for fut in (self.head, self.finished):
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: an exchange nobody waits for any more logs nothing

    @property
    def done(self) -> bool:
        return self._mode == _DONE


class Lost(HttpError):
    """The connection closed before the response was complete (``fresh``: before any byte of it)."""

    def __init__(self, exc: BaseException | None, fresh: bool) -> None:
        super().__init__(f"connection closed by the server{f': {exc}' if exc else ''}")
        self.fresh = fresh
