"""The loopback wire as ground truth: packets captured with kernel timestamps, parsed into HTTP exchanges.

**Capture** (:func:`capture`, run as ``python -m tests.wire_capture --port P --out FILE`` by
:class:`Capturing`, as root): an ``AF_PACKET`` socket bound to ``lo`` with ``SO_TIMESTAMPNS``
and a classic BPF filter (:func:`bpf_program`) that keeps, in the kernel, only the IPv4 TCP
segments to or from port ``P`` that carry payload, each once (loopback shows a packet twice:
the outgoing copy is dropped). Each packet is written as its kernel receive time (``CLOCK_REALTIME``
ns) and its IP packet; the socket's drop count goes to ``FILE.json`` when it stops (SIGTERM).
The capture does nothing else while packets flow: parsing happens afterwards.

**Parsing** (:func:`read_packets`, :func:`exchanges`): each direction of a connection is put back
in sequence order (retransmitted bytes once, at their first time); the client's bytes are split
into HTTP requests, the server's into responses (chunked bodies de-chunked) and each response's
SSE events. An :class:`Exchange` is the k-th request of a connection with the k-th response
(HTTP/1.1, no pipelining): when its first byte was on the wire, when each token-bearing event
was complete on the wire (the moment a client could have read it), and the stream's number
from the mock's ``"id": "cmpl-<n>"`` (``tests/mock_openai.py``).

**Clocks**: :class:`ClockMap` turns kernel (``CLOCK_REALTIME``) times into ``perf_counter_ns``
(``CLOCK_MONOTONIC``, every process of the host) by two pairs of readings taken before and after
a run, interpolated, so a slewing wall clock does not drift the comparison.
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35  # SO_TIMESTAMPNS_OLD on Linux; the control message's type is the same number
SO_RCVBUFFORCE = 33
SO_ATTACH_FILTER = 26
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4
ETH_HEADER = 14
SNAP = 262_144
_RECORD = struct.Struct("<qI")  # kernel time ns, IP packet length


# -- the kernel-side filter ------------------------------------------------------------------------
def bpf_program(port: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF: accept IPv4 TCP segments with payload to or from ``port``, not loopback's outgoing copy."""
    drop, ok = "drop", "port_ok"
    prog: list[tuple[int, object, object, int]] = [
        (0x20, 0, 0, 0xFFFFF004),  # ld  [SKF_AD_OFF + SKF_AD_PKTTYPE]
        (0x15, drop, 0, PACKET_OUTGOING),  # jeq #OUTGOING -> drop
        (0x28, 0, 0, 12),  # ldh [12]: ethertype
        (0x15, 0, drop, 0x0800),  # jeq #IPv4 else drop
        (0x30, 0, 0, 23),  # ldb [23]: IP protocol
        (0x15, 0, drop, 6),  # jeq #TCP else drop
        (0xB1, 0, 0, 14),  # ldxb 4*([14]&0xf): X = IP header length
        (0x48, 0, 0, 14),  # ldh [x+14]: source port
        (0x15, ok, 0, port),
        (0x48, 0, 0, 16),  # ldh [x+16]: destination port
        (0x15, 0, drop, port),
        (0x50, 0, 0, 26),  # port_ok: ldb [x+26]: TCP data offset
        (0x74, 0, 0, 4),  # rsh #4
        (0x64, 0, 0, 2),  # lsh #2: A = TCP header length
        (0x0C, 0, 0, 0),  # add x: A = IP + TCP header lengths
        (0x02, 0, 0, 0),  # st M[0]
        (0x28, 0, 0, 16),  # ldh [16]: IP total length
        (0x61, 0, 0, 0),  # ldx M[0]
        (0x1C, 0, 0, 0),  # sub x: A = payload length
        (0x15, drop, 0, 0),  # jeq #0 -> drop
        (0x06, 0, 0, SNAP),  # ret #SNAP: accept
        (0x06, 0, 0, 0),  # drop: ret #0
    ]
    labels = {"port_ok": 11, "drop": len(prog) - 1}
    return [
        (code, *(labels[j] - i - 1 if isinstance(j, str) else int(j) for j in (jt, jf)), k)  # type: ignore[misc]
        for i, (code, jt, jf, k) in enumerate(prog)
    ]


def _attach(sock: socket.socket, port: int) -> None:
    insns = bpf_program(port)
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *insn) for insn in insns))
    fprog = struct.pack("HL", len(insns), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class _Stopped(Exception):
    pass


def _stop(_sig: int, _frame: object) -> None:
    raise _Stopped


def capture(port: int, out: Path) -> None:
    """Capture until SIGTERM/SIGINT (module doc); prints ``READY`` once the socket is bound and filtered."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    _attach(sock, port)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 512 * 2**20)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 512 * 2**20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("lo", 0))
    buf = bytearray(SNAP)
    view = memoryview(buf)
    packets = 0

    def keep(n: int, anc: list) -> None:
        sec, nsec = struct.unpack_from("qq", anc[0][2]) if anc else divmod(time.time_ns(), 1_000_000_000)
        fh.write(_RECORD.pack(sec * 1_000_000_000 + nsec, n - ETH_HEADER))
        fh.write(view[ETH_HEADER:n])

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with out.open("wb", buffering=8 * 2**20) as fh:
        print("READY", flush=True)
        try:
            while True:
                n, anc, _flags, _addr = sock.recvmsg_into([buf], 64)
                keep(n, anc)
                packets += 1
        except _Stopped:
            pass
        sock.setblocking(False)  # what the kernel queued before the stop still counts
        while True:
            try:
                n, anc, _flags, _addr = sock.recvmsg_into([buf], 64)
            except BlockingIOError:
                break
            keep(n, anc)
            packets += 1
    seen, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    Path(f"{out}.json").write_text(json.dumps({"written": packets, "kernel_packets": seen, "kernel_drops": drops}))


class Capturing:
    """``with Capturing(port, path) as cap:`` captures in a child process; its PID alone is stopped on exit."""

    def __init__(self, port: int, path: Path) -> None:
        self.port, self.path = port, Path(path)
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Capturing:
        cmd = [sys.executable, "-m", "tests.wire_capture", "--port", str(self.port), "--out", str(self.path)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if line.strip() != "READY":
            self.__exit__()
            raise RuntimeError(f"the capture did not start (needs root and AF_PACKET): {line!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            time.sleep(0.2)  # the last segments reach the capture's socket before it is told to stop
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdout:
            proc.stdout.close()

    def stats(self) -> dict[str, int]:
        """Packets written, and what the kernel counted and dropped (after exit)."""
        path = Path(f"{self.path}.json")
        return json.loads(path.read_text()) if path.exists() else {}


# -- reading the capture ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Packet:
    """One captured TCP segment with payload: kernel time, endpoints, sequence number, bytes."""

    ts_ns: int
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    payload: bytes


def parse_ip(ts_ns: int, ip: bytes) -> Packet | None:
    """An IPv4 TCP packet as a :class:`Packet` (None for anything else or no payload)."""
    if len(ip) < 40 or ip[0] >> 4 != 4 or ip[9] != 6:
        return None
    ihl = (ip[0] & 0x0F) * 4
    total = min(struct.unpack_from("!H", ip, 2)[0], len(ip))
    sport, dport, seq = struct.unpack_from("!HHI", ip, ihl)
    payload = ip[ihl + (ip[ihl + 12] >> 4) * 4 : total]
    if not payload:
        return None
    src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
    return Packet(ts_ns, (src, sport), (dst, dport), seq, bytes(payload))


def read_packets(path: Path) -> list[Packet]:
    """Every packet of a capture file, in capture order."""
    data = Path(path).read_bytes()
    out, pos = [], 0
    while pos + _RECORD.size <= len(data):
        ts, n = _RECORD.unpack_from(data, pos)
        pos += _RECORD.size
        packet = parse_ip(ts, data[pos : pos + n])
        pos += n
        if packet is not None:
            out.append(packet)
    return out


@dataclass
class _Bytes:
    """One direction of a connection, reassembled: its bytes and when each run of them was captured."""

    data: bytearray = field(default_factory=bytearray)
    starts: list[int] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    gaps: int = 0

    def ts_at(self, offset: int) -> int:
        return self.stamps[max(0, bisect.bisect_right(self.starts, offset) - 1)]


def reassemble(segments: Iterable[Packet]) -> _Bytes:
    """A direction's segments in sequence order (first capture wins where they overlap; holes counted)."""
    segments = list(segments)
    out = _Bytes()
    if not segments:
        return out
    base = min(segments, key=lambda p: p.ts_ns).seq
    ordered = sorted(((p.seq - base) & 0xFFFFFFFF, p.ts_ns, p.payload) for p in segments)
    for rel, ts, payload in ordered:
        if rel >= 2**31:
            continue  # before the first captured byte: a retransmission of what came before the capture
        end = len(out.data)
        if rel + len(payload) <= end:
            continue
        if rel > end:
            out.gaps += 1
            rel = end
        out.starts.append(len(out.data))
        out.stamps.append(ts)
        out.data += payload[end - rel :] if rel < end else payload
    return out


@dataclass
class Exchange:
    """One request and its response on one connection (module doc). Times are kernel (realtime) ns."""

    client: tuple[str, int]
    order: int
    method: str
    path: str
    request_ns: int
    request_end_ns: int
    status: int | None = None
    events_ns: list[int] = field(default_factory=list)  # token-bearing SSE events, complete on the wire
    tag: int | None = None  # the mock's stream number ("id": "cmpl-<n>")
    done: bool = False  # data: [DONE] seen
    gaps: int = 0  # holes in the capture of this connection (lost packets)


_REQUEST_LINE = re.compile(rb"(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) (\S+) HTTP/1\.[01]\r\n")
_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)")
_CHUNKED = re.compile(rb"(?im)^transfer-encoding:\s*chunked")
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})")
_TAG = re.compile(rb'"id"\s*:\s*"[^"]*?(\d+)"')


def _requests(stream: _Bytes) -> Iterator[tuple[str, str, int, int]]:
    """(method, path, first byte's time, last byte's time) of each request in the client's bytes."""
    data, pos = bytes(stream.data), 0
    while (m := _REQUEST_LINE.search(data, pos)) is not None:
        head_end = data.find(b"\r\n\r\n", m.start())
        if head_end < 0:
            return
        length = _LENGTH.search(data, m.start(), head_end)
        end = min(head_end + 4 + (int(length.group(1)) if length else 0), len(data))
        yield m.group(1).decode(), m.group(2).decode(), stream.ts_at(m.start()), stream.ts_at(end - 1)
        pos = end


def _body(data: bytes, start: int, end: int, chunked: bool) -> tuple[bytes, list[tuple[int, int]]]:
    """A response body (de-chunked) and its map of (body offset, raw offset) runs."""
    if not chunked:
        return data[start:end], [(0, start)]
    parts, runs, size, pos = [], [], 0, start
    while pos < end:
        line_end = data.find(b"\r\n", pos, end)
        if line_end < 0:
            break
        try:
            n = int(data[pos:line_end].split(b";")[0], 16)
        except ValueError:
            break
        if n == 0:
            break
        runs.append((size, line_end + 2))
        parts.append(data[line_end + 2 : line_end + 2 + n])
        size += n
        pos = line_end + 2 + n + 2
    return b"".join(parts), runs


def _token_bearing(payload: bytes) -> tuple[bool, int | None]:
    """Whether an SSE data payload carries a token (a completion's choice, a chat delta's content), and its tag."""
    tag = _TAG.search(payload)
    try:
        obj = json.loads(payload)
    except ValueError:
        return False, None
    choices = obj.get("choices") if isinstance(obj, dict) else None
    bears = False
    if choices and isinstance(choices[0], dict):
        first = choices[0]
        bears = "text" in first or bool((first.get("delta") or {}).get("content"))
    return bears, int(tag.group(1)) if tag else None


def _response(stream: _Bytes, data: bytes, start: int, end: int, ex: Exchange) -> None:
    """Fill ``ex`` from the response in ``data[start:end]``: status, token events and their times, tag, [DONE]."""
    status = _STATUS.match(data, start)
    ex.status = int(status.group(1)) if status else None
    head_end = data.find(b"\r\n\r\n", start, end)
    if head_end < 0:
        return
    body, runs = _body(data, head_end + 4, end, bool(_CHUNKED.search(data, start, head_end)))
    run_starts = [r[0] for r in runs]
    pos = 0
    while (at := body.find(b"data: ", pos)) >= 0:
        stop = body.find(b"\n\n", at)
        if stop < 0:
            break
        payload, pos = body[at + 6 : stop], stop + 2
        if payload.strip() == b"[DONE]":
            ex.done = True
            continue
        bears, tag = _token_bearing(payload)
        if ex.tag is None and tag is not None:
            ex.tag = tag
        if bears:
            body_start, raw_start = runs[bisect.bisect_right(run_starts, stop + 1) - 1]
            ex.events_ns.append(stream.ts_at(raw_start + stop + 1 - body_start))


def exchanges(packets: Iterable[Packet], server_port: int) -> list[Exchange]:
    """Every request/response exchange with the server on ``server_port``, in the order requests hit the wire."""
    by_conn: dict[tuple[str, int], tuple[list[Packet], list[Packet]]] = {}
    for p in packets:
        if p.dst[1] == server_port:
            by_conn.setdefault(p.src, ([], []))[0].append(p)
        elif p.src[1] == server_port:
            by_conn.setdefault(p.dst, ([], []))[1].append(p)
    out: list[Exchange] = []
    for client, (up, down) in by_conn.items():
        sent, back = reassemble(up), reassemble(down)
        data = bytes(back.data)
        starts = [m.start() for m in _STATUS.finditer(data)]
        for k, (method, path, first, last) in enumerate(_requests(sent)):
            ex = Exchange(client, k, method, path, first, last, gaps=sent.gaps + back.gaps)
            if k < len(starts):
                _response(back, data, starts[k], starts[k + 1] if k + 1 < len(starts) else len(data), ex)
            out.append(ex)
    return sorted(out, key=lambda e: e.request_ns)


# -- a client's requests against the wire's ------------------------------------------------------------
@dataclass(frozen=True)
class ClientRequest:
    """A request as a client recorded it: its send stamp, its token-bearing chunks' stamps, and the
    server's prompt count it kept (the mock's stream number), all perf_counter ns."""

    send_ns: int
    stamps: list[int]
    tag: int | None = None


def match(requests: list[ClientRequest], wire: list[Exchange]) -> list[tuple[ClientRequest, Exchange]]:
    """Each client request with its exchange on the wire: by the stream number when every request's
    is found once, else by order (the last ``len(requests)`` streams, sorted by time on both sides,
    since warm-up requests came first). Requests without token events on either side are left out."""
    streams = [e for e in wire if e.events_ns]
    by_tag: dict[int, Exchange] = {}
    for e in streams:
        if e.tag is not None:
            by_tag[e.tag] = e if e.tag not in by_tag else by_tag[e.tag]
    tags = [r.tag for r in requests]
    if tags and None not in tags and len(set(tags)) == len(tags) and all(t in by_tag for t in tags):
        pairs = [(r, by_tag[r.tag]) for r in requests if r.tag is not None]  # every tag is set here
    else:
        ordered = sorted(streams, key=lambda e: e.request_ns)[-len(requests) :] if requests else []
        pairs = list(zip(sorted(requests, key=lambda r: r.send_ns), ordered, strict=False))
    return [(r, e) for r, e in pairs if r.stamps]


# -- the two clocks --------------------------------------------------------------------------------
def clock_pair() -> tuple[int, int]:
    """(CLOCK_REALTIME ns, perf_counter_ns) read as close together as this process can (best of 50)."""
    best = None
    for _ in range(50):
        a = time.perf_counter_ns()
        real = time.time_ns()
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, real, (a + b) // 2)
    assert best is not None
    return best[1], best[2]


@dataclass(frozen=True)
class ClockMap:
    """Kernel (realtime) ns to perf_counter ns, interpolated between two :func:`clock_pair` readings."""

    before: tuple[int, int]
    after: tuple[int, int]

    def mono(self, real_ns: int) -> int:
        (r0, m0), (r1, m1) = self.before, self.after
        rate = (m1 - m0) / (r1 - r0) if r1 != r0 else 1.0
        return m0 + round((real_ns - r0) * rate)


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.wire_capture --port P --out FILE`` (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    capture(args.port, args.out)


if __name__ == "__main__":
    main()
