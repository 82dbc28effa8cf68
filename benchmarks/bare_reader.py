"""The floor of a Python streaming client: read each SSE event with the kernel's stamp, and nothing else.

``client_at_scale.py --clients floor`` runs it to say what reading alone costs on this machine, so that
our client's CPU per token event has something to be measured against. Like ours it keeps ``C``
keep-alive connections (opened before the first request), sends the next request as a slot frees,
and reads each event by a peek and a take, stamped by the kernel (``SO_TIMESTAMPNS``). Unlike ours it
does nothing else while the streams run: no HTTP framing beyond seeing the body end, no SSE or JSON,
no records, no load driver, no samplers. What any client that reads each event in Python pays here
is what this pays. After the run (outside the measured window) it finds each request's token events
and tag and prints one JSON document: ``{"requests": [{"send_ns", "stamps", "tag"}], "event_loop"}``.
A benchmark's tool, never a user's path.

    .venv/bin/python benchmarks/bare_reader.py --url http://127.0.0.1:PORT/v1 --concurrency 512 --requests 2048
        [--tokens 32] [--prompt-tokens 32] [--no-peek]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import struct
import sys
import time
from urllib.parse import urlsplit

_SO_TIMESTAMPNS = 35  # Linux
_ANC = socket.CMSG_SPACE(16)
_SCRATCH = bytearray(65_536)
_END = b"\r\n0\r\n\r\n"  # a chunked body's last bytes
_TAG = re.compile(rb'"prompt_tokens":\s*(\d+)')


class Stream:
    """One connection: each read's (kernel stamp, bytes) of the request in flight."""

    def __init__(self, sock: socket.socket, offset_ns: int, peek: bool) -> None:
        self.sock, self.offset_ns, self.peek = sock, offset_ns, peek
        self.reads: list[tuple[int, bytes]] = []
        self.done: asyncio.Future[None] | None = None
        self.tail = b""

    def _stamp(self, anc: list[tuple[int, int, bytes]]) -> int:
        now = time.perf_counter_ns()
        if anc and anc[0][1] == _SO_TIMESTAMPNS:
            s, ns = struct.unpack_from("@qq", anc[0][2])
            return min(s * 1_000_000_000 + ns - self.offset_ns, now)
        return now

    def readable(self) -> None:
        sock, reads = self.sock, self.reads
        try:
            if not self.peek:
                data, anc, _, _ = sock.recvmsg(65_536, _ANC)
                reads.append((self._stamp(anc), data))
            else:
                data, anc, _, _ = sock.recvmsg(65_536, _ANC, socket.MSG_PEEK)
                first = data.find(b"\n\n")
                if first < 0 or data.find(b"\n\n", first + 2) < 0:
                    sock.recv_into(_SCRATCH, len(data))
                    reads.append((self._stamp(anc), data))
                else:
                    start = 0
                    while start < len(data):
                        end = data.find(b"\n\n", start)
                        end = len(data) if end < 0 else end + 2
                        piece, anc, _, _ = sock.recvmsg(end - start, _ANC)
                        reads.append((self._stamp(anc), piece))
                        start = end
        except BlockingIOError:
            return
        if not data:
            raise SystemExit("the server closed a connection")
        self.tail = (self.tail + data)[-len(_END) :]
        if self.tail == _END and self.done is not None and not self.done.done():
            self.done.set_result(None)


def offset_ns() -> int:
    a = time.perf_counter_ns()
    wall = time.time_ns()
    return wall - (a + time.perf_counter_ns()) // 2


def token_events(reads: list[tuple[int, bytes]]) -> tuple[list[int], int]:
    """The stamps of a response's token events (each event stamped by the read that completed it), its tag."""
    stamps, tag, pending = [], -1, b""
    for t, data in reads:
        parts = (pending + data).split(b"\n\n")
        pending = parts.pop()
        for event in parts:
            line = event[event.find(b"data:") :]
            if line.startswith(b"data: [DONE]"):
                continue
            if (m := _TAG.search(line)) is not None:
                tag = int(m.group(1))
            if b'"choices":[]' not in line and b'"choices": []' not in line and b'"choices"' in line:
                stamps.append(t)
    return stamps, tag


async def main(args: argparse.Namespace) -> dict[str, object]:
    parts = urlsplit(args.url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/") + "/completions"
    body = json.dumps(
        {
            "model": args.model,
            "prompt": [1] * args.prompt_tokens,
            "max_tokens": args.tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
    ).encode()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    streams = []
    for _ in range(args.concurrency):  # opened before the first request, as ours does
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, port))
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = Stream(sock, offset_ns(), not args.no_peek)
        loop.add_reader(sock.fileno(), stream.readable)
        streams.append(stream)
    left = iter(range(args.requests))
    out: list[tuple[int, list[tuple[int, bytes]]]] = []

    async def slot(stream: Stream) -> None:
        for _ in left:
            stream.reads, stream.tail = [], b""
            stream.done = loop.create_future()
            sent = time.perf_counter_ns()
            stream.sock.send(request)
            await stream.done
            out.append((sent, stream.reads))

    await asyncio.gather(*(slot(s) for s in streams))
    for s in streams:
        loop.remove_reader(s.sock.fileno())
        s.sock.close()
    requests = []
    for sent, reads in out:
        stamps, tag = token_events(reads)
        requests.append({"send_ns": sent, "stamps": stamps, "tag": tag})
    return {"requests": requests, "event_loop": type(loop).__module__}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="mock")
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--no-peek", action="store_true", help="one read per readiness (events waiting together share)")
    cli = ap.parse_args()
    if min(cli.concurrency, cli.requests, cli.tokens, cli.prompt_tokens) < 1:
        ap.error("--concurrency, --requests, --tokens and --prompt-tokens must be 1 or more")
    try:
        import uvloop

        result = uvloop.run(main(cli))
    except ImportError:
        result = asyncio.run(main(cli))
    json.dump(result, sys.stdout)
