"""A plain-HTTP connection whose reads are stamped by the kernel: when the bytes reached this host.

A stamp taken in Python is as late as the event loop was busy: at hundreds of streams a burst of
token events waits its turn, and the last of them is stamped milliseconds after it arrived. With
``SO_TIMESTAMPNS`` the kernel stamps each packet as it is received (the same moment a packet capture
records) and ``recvmsg`` hands the stamp of the last packet of each read over with the bytes, so a
read's stamp no longer depends on when the loop got to it. The stamp is ``CLOCK_REALTIME``; it is moved
onto ``perf_counter_ns`` (``CLOCK_MONOTONIC``, every other stamp's clock) by the two clocks' difference,
read once per connection (it changes only when the wall clock is stepped: a stamp that would then lie
in the future is the moment of the read instead). A read without a stamp (a kernel that gives none) is stamped in Python, as
before. Reads are taken event by event (a peek first, then each piece up to the end of an SSE event),
so events that wait together in the socket keep the stamps of their own packets; but packets the kernel
merged in the receive queue (TCP coalescing, while nobody read) carry only the newest one's stamp, so
a connection left unread for longer than its token gap still stamps its older events late (by less
than the loop's lag). TLS connections keep the event loop's transport (their bytes are decrypted in Python: no
kernel stamp belongs to them).

:class:`StampedConnection` speaks to :class:`~engine.backends.openai.http.Client` as its transport-based
connection does: ``send``, ``abort``, ``usable``, ``exchange``, ``closed``, ``used``.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from typing import TYPE_CHECKING

from engine.backends.openai.http_response import Exchange, HttpError, Lost

if TYPE_CHECKING:
    from engine.backends.openai.http import Client

# bytes asked for by one read: an SSE event is a few hundred. Under glibc's mmap threshold (128 KiB) on
# purpose: Python allocates the whole size for each read, and a 256 KiB buffer was an mmap, an mremap and an
# munmap (with their page faults) per token event: 14 of the 26 us of CPU an event cost at 512 streams
READ_BYTES = 65_536
# Python 3.11 does not name it: Linux's generic number (SCM_TIMESTAMPNS is the same); elsewhere none, and
# reads are stamped in Python as over TLS
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
_STAMP = struct.Struct("@qq")  # struct timespec: seconds, nanoseconds
_unpack_stamp = _STAMP.unpack_from
_ANCILLARY = socket.CMSG_SPACE(_STAMP.size)
_PEEK = socket.MSG_PEEK
_SCRATCH = bytearray(READ_BYTES)  # where peeked bytes are taken off a socket: written to, never read


def kernel_stamps_on(sock: socket.socket) -> bool:
    """Ask the kernel to stamp the packets ``sock`` receives; False where it cannot."""
    if _SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def clock_offset_ns() -> int:
    """``CLOCK_REALTIME`` minus ``CLOCK_MONOTONIC`` now (the two read back to back, the closer pair of three)."""
    pairs = []
    for _ in range(3):
        a = time.perf_counter_ns()
        wall = time.time_ns()
        b = time.perf_counter_ns()
        pairs.append((b - a, wall - (a + b) // 2))
    return min(pairs)[1]


def _stamp(ancillary: list[tuple[int, int, bytes]], offset_ns: int) -> int:
    """The read's stamp on ``perf_counter_ns``'s clock: the kernel's when it gave one, else now."""
    now = time.perf_counter_ns()
    if ancillary:  # the stamp is the only control message asked for
        level, kind, data = ancillary[0]
        if kind == _SO_TIMESTAMPNS and level == socket.SOL_SOCKET and len(data) >= _STAMP.size:
            seconds, nanos = _unpack_stamp(data)
            t = seconds * 1_000_000_000 + nanos - offset_ns
            return t if t < now else now
    return now


class StampedConnection:
    """One plain TCP connection read with ``recvmsg`` in a loop reader callback."""

    def __init__(self, client: Client, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.sock = sock
        self.loop = loop
        self.exchange: Exchange | None = None
        self.closed = False
        self.used = False
        self._out = b""  # request bytes the socket did not take yet
        self._offset_ns = clock_offset_ns()
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        loop.add_reader(sock.fileno(), self._readable)

    def usable(self) -> bool:
        return not self.closed

    def _readable(self) -> None:
        """Peek at what arrived; take it event by event (each piece ends where an SSE event ends), so each
        piece's stamp is the packet that completed its event even when several wait together.

        The usual read holds one event (or a part of one): the peek's bytes and stamp are then the read's
        (a peek stamps the last packet it looked at, as a read would), and the bytes are taken off the
        socket into a scratch buffer: two system calls, one copy."""
        sock = self.sock
        try:
            data, ancillary, _flags, _ = sock.recvmsg(READ_BYTES, _ANCILLARY, _PEEK)
            if not data:  # the server closed its side
                self._lost(None)
                return
            first = data.find(b"\n\n")
            if first < 0 or data.find(b"\n\n", first + 2) < 0:  # at most one event: all at once
                sock.recv_into(_SCRATCH, len(data))
                self._fed(data, ancillary)
                return
            start = 0
            while start < len(data):
                end = data.find(b"\n\n", start)
                end = len(data) if end < 0 else end + 2
                piece, ancillary, _flags, _ = sock.recvmsg(end - start, _ANCILLARY)
                if not self._fed(piece, ancillary):
                    return
                start = end
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)

    def _fed(self, data: bytes, ancillary: list[tuple[int, int, bytes]]) -> bool:
        """Feed one stamped read to the exchange; False when the connection is done with."""
        ex = self.exchange
        if ex is None:  # bytes nobody asked for: the connection cannot be trusted any more
            self.abort()
            return False
        try:
            if ex.feed(_stamp(ancillary, self._offset_ns), data):
                self.exchange = None
                self.client.release(self, ex.keep_alive)
                return False
        except HttpError as err:
            self.exchange = None
            self.abort()
            ex.fail(err)
            return False
        return True

    def send(self, ex: Exchange, data: bytes) -> None:
        if self.closed:
            raise Lost(None, fresh=True)
        self.exchange, self.used, ex.conn = ex, True, self
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._lost(exc)
            return
        if sent < len(data):
            self._out = data[sent:]
            self.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        self._out = self._out[sent:]
        if not self._out:
            self.loop.remove_writer(self.sock.fileno())

    def _lost(self, exc: BaseException | None) -> None:
        self._close()
        ex, self.exchange = self.exchange, None
        if ex is not None:
            ex.lost(exc)

    def abort(self) -> None:
        """Close now; an exchange still waiting fails as a lost connection (as a transport's would)."""
        self._lost(None)

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.client.forget(self)
        fd = self.sock.fileno()
        if fd >= 0 and not self.loop.is_closed():
            self.loop.remove_reader(fd)
            self.loop.remove_writer(fd)
        self.sock.close()
