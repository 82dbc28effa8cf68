"""A small HTTP/1.1 client for OpenAI-compatible servers, built so that timing costs almost nothing.

Each network read is stamped and kept as ``(stamp, body bytes)``: on a plain ``http://`` connection
by the kernel as the packets arrive (:mod:`engine.backends.openai.kernel_stamps`, ``SO_TIMESTAMPNS``:
the stamp does not wait for a busy event loop), else (TLS, or a kernel without receive stamps) with
``time.perf_counter_ns()`` in the protocol's ``data_received`` callback, the first Python code that
sees the bytes; the
only work done then is the HTTP framing (the status line and headers once, chunk sizes of a
chunked body) needed to know where the body ends. Everything else (SSE lines, JSON, token
counts) is done by the caller afterwards (:mod:`engine.backends.openai.sse`). A general client
such as aiohttp wakes a coroutine per read and stamps only when it resumes: later, and at several
times the CPU.

What it speaks: ``http://`` and ``https://`` (TLS through the event loop), HTTP/1.1 keep-alive
connections pooled per client (unbounded, as aiohttp's ``limit=0``), bodies framed by
``Content-Length``, ``Transfer-Encoding: chunked`` or the end of the connection (HTTP/1.0). No
proxies (aiohttp's ``trust_env=False`` before), redirects or compression (none is asked for).
A pooled connection the server closed while idle is noticed by the loop (its EOF) and dropped;
a request that finds one dead before any byte of the answer is sent again once on a new one.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

from engine.backends.openai.http_response import Connection, Exchange, HttpError, Lost
from engine.backends.openai.kernel_stamps import StampedConnection, kernel_stamps_on

__all__ = ["Client", "ConnectFailed", "Exchange", "HttpError"]

# The server's address as getaddrinfo gives it for a stream socket: (host, port) over IPv4,
# (host, port, flowinfo, scope id) over IPv6.
SocketAddress = tuple[str, int] | tuple[str, int, int, int]


class ConnectFailed(HttpError):
    """No connection to the server; ``reason`` says why (refused, unknown host, TLS)."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(f"cannot connect to {host}:{port}: {reason}")
        self.reason = reason


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: feeds the exchange in flight, goes back to the pool when it is done."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.used = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter_ns()  # the read's stamp: before anything else looks at it
        ex = self.exchange
        if ex is None:  # bytes nobody asked for: the connection cannot be trusted any more
            self.abort()
            return
        try:
            if ex.feed(t, data):
                self.exchange = None
                self.client.release(self, ex.keep_alive)
        except HttpError as err:
            self.exchange = None
            self.abort()
            ex.fail(err)

    def eof_received(self) -> bool | None:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.client.forget(self)
        ex, self.exchange = self.exchange, None
        if ex is not None:
            ex.lost(exc)

    def send(self, ex: Exchange, data: bytes) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise Lost(None, fresh=True)
        self.exchange, self.used, ex.conn = ex, True, self
        self.transport.write(data)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


def _target(base_url: str) -> tuple[str, str, int, ssl.SSLContext | None, str]:
    """(host, path prefix, port, TLS context, Host header) of a base URL."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpError(f"not an http(s) URL: {base_url}")
    tls = ssl.create_default_context() if parts.scheme == "https" else None
    port = parts.port or (443 if tls else 80)
    default = (tls is None and port == 80) or (tls is not None and port == 443)
    host_header = parts.hostname if default else f"{parts.hostname}:{port}"
    if ":" in parts.hostname:  # an IPv6 literal
        host_header = f"[{parts.hostname}]" + ("" if default else f":{port}")
    return parts.hostname, parts.path.rstrip("/"), port, tls, host_header


class Client:
    """Requests to one server (``base_url``'s scheme, host and port) over pooled keep-alive connections."""

    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None) -> None:
        self.host, self.prefix, self.port, self._tls, host_header = _target(base_url)
        fixed = {"Host": host_header, "User-Agent": "latencylab", **(headers or {})}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._idle: list[Connection] = []  # _Connection, or StampedConnection (plain HTTP: kernel stamps)
        self._all: set[Connection] = set()
        self._address: asyncio.Future[SocketAddress] | None = None
        self.kernel_stamps = False  # whether reads are stamped by the kernel (engine/backends/openai/kernel_stamps.py)

    def release(self, conn: Connection, keep_alive: bool) -> None:
        """A connection whose exchange is over: back to the pool, or closed."""
        if keep_alive and not conn.closed:
            self._idle.append(conn)
        else:
            conn.abort()

    def forget(self, conn: Connection) -> None:
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            address = await self._resolved(loop)
            conn = await (self._plain(loop, address) if self._tls is None else self._transported(loop, address))
        except (OSError, ssl.SSLError) as exc:
            raise ConnectFailed(self.host, self.port, str(exc) or type(exc).__name__) from exc
        self._all.add(conn)
        return conn

    async def _transported(self, loop: asyncio.AbstractEventLoop, address: SocketAddress) -> _Connection:
        _, conn = await loop.create_connection(
            lambda: _Connection(self), host=address[0], port=self.port, ssl=self._tls, server_hostname=self.host
        )
        return conn

    async def _plain(self, loop: asyncio.AbstractEventLoop, address: SocketAddress) -> Connection:
        """A plain connection read with kernel stamps where the kernel gives them, else the loop's transport."""
        sock = socket.socket(socket.AF_INET6 if len(address) == 4 else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, (address[0], self.port, *address[2:]))
            if kernel_stamps_on(sock):
                self.kernel_stamps = True
                return StampedConnection(self, sock, loop)
            _, conn = await loop.create_connection(lambda: _Connection(self), sock=sock)
        except BaseException:
            sock.close()
            raise
        return conn

    async def _resolved(self, loop: asyncio.AbstractEventLoop) -> SocketAddress:
        """The server's address, resolved once for every connection (aiohttp cached its DNS answers too)."""
        if self._address is None:
            self._address = pending = loop.create_future()
            try:
                infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            except BaseException as exc:
                self._address = None  # the next connection asks again
                if isinstance(exc, asyncio.CancelledError):
                    pending.cancel()
                else:
                    pending.set_exception(exc)
                    pending.exception()
                raise
            pending.set_result(infos[0][4])
        return await asyncio.shield(self._address)

    async def request(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Exchange:
        """Send a request (``path`` under the base URL's path) and wait for the head of its answer.

        The body may still be arriving: await ``exchange.finished`` for the rest. ``exchange.sent_ns``
        is stamped as the request goes to the kernel on the connection that got the answer: a new
        connection's handshake (and the loop's wait for it) is the client's send lag, not the server's
        TTFT, which starts, as on the wire, with the request's first byte."""
        loop = asyncio.get_running_loop()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()).encode("latin-1")
        length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
        data = f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode() + self._fixed + extra + length + b"\r\n"
        data += body or b""
        for attempt in (0, 1):
            ex = Exchange(loop)
            conn = self._pooled() or await self._connect()
            reused = conn.used
            try:
                ex.sent_ns = time.perf_counter_ns()
                conn.send(ex, data)
                await ex.head
            except Lost as lost:
                if attempt == 0 and reused and lost.fresh:
                    continue  # the server had closed this idle connection: once more on a new one
                raise
            except BaseException:
                conn.abort()
                raise
            return ex
        raise AssertionError("unreachable")

    async def open(self, n: int) -> int:
        """Have ``n`` idle connections ready (opened at once, before a phase sends on them); how many are.
        A connection that cannot be opened is left to the request that needs it (its reason is then that
        request's)."""

        async def one() -> None:
            try:
                conn = await self._connect()
            except HttpError:
                return
            self._idle.append(conn)  # at once: a wait cut short keeps those already open

        missing = n - len(self._idle)
        if missing > 0:
            await asyncio.gather(*(one() for _ in range(missing)))
        return len(self._idle)

    def _pooled(self) -> Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
        return None

    async def read(self, ex: Exchange) -> None:
        """Wait for the rest of the body; a cancelled wait closes the connection (the server sees the client go)."""
        try:
            await ex.finished
        except BaseException:
            if not ex.done and ex.conn is not None:
                ex.conn.exchange = None
                ex.conn.abort()
            raise

    async def fetch(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes]:
        """A whole (non-streamed) answer: status and body."""
        ex = await self.request(method, path, body, headers)
        await self.read(ex)
        return ex.status, ex.body

    def close(self) -> None:
        """Close every connection (idle or not)."""
        for conn in list(self._all):
            conn.abort()
        self._idle.clear()
        self._all.clear()
