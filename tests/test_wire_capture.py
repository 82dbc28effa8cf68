"""The loopback capture and its parser (tests/wire_capture.py): synthetic packet sequences, and one real capture."""

from __future__ import annotations

import json
import os
import socket
import struct
import time
import urllib.request
from pathlib import Path

import pytest

from tests import mock_openai
from tests import wire_capture as w

SERVER = ("127.0.0.1", 8000)
CLIENT = ("127.0.0.1", 40001)


def _ip(src: tuple[str, int], dst: tuple[str, int], seq: int, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq, 0, 5 << 4, 0x18, 65535, 0, 0)
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0,
                       socket.inet_aton(src[0]), socket.inet_aton(dst[0]))  # fmt: skip
    return head + tcp + payload


class Wire:
    """Builds one connection's segments: each direction's sequence numbers follow its bytes."""

    def __init__(self, client: tuple[str, int] = CLIENT) -> None:
        self.client = client
        self.seq = {"up": 1000, "down": 5_000_000}
        self.packets: list[w.Packet] = []

    def send(self, ts_ms: float, payload: bytes, up: bool = False, seq: int | None = None) -> None:
        way = "up" if up else "down"
        src, dst = (self.client, SERVER) if up else (SERVER, self.client)
        start = self.seq[way] if seq is None else seq
        packet = w.parse_ip(int(ts_ms * 1e6), _ip(src, dst, start & 0xFFFFFFFF, payload))
        assert packet is not None
        self.packets.append(packet)
        if seq is None:
            self.seq[way] += len(payload)


def _event(n: int, text: str | None = " tok", usage: bool = False) -> bytes:
    obj: dict = {"id": f"cmpl-{n}", "choices": [] if usage else [{"index": 0, "text": text}]}
    if usage:
        obj["usage"] = {"prompt_tokens": n, "completion_tokens": 2}
    data = b"data: " + json.dumps(obj).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


REQUEST = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"
HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
DONE = b"13\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"


def test_a_keep_alive_connection_with_split_and_repeated_segments():
    wire = Wire()
    wire.send(0.0, REQUEST, up=True)
    wire.send(0.5, b'{"a": [1]}\n', up=True)  # the body in a segment of its own
    wire.send(100.0, HEAD + _event(1))
    second = _event(1)
    wire.send(120.0, second[:30])  # an event split across two segments: complete at the second one
    resend_at = wire.seq["down"]
    wire.send(121.0, second[30:])
    wire.send(121.5, second[30:], seq=resend_at)  # a retransmission: its bytes count once, at the first time
    wire.send(130.0, _event(1, usage=True) + DONE)
    wire.send(200.0, REQUEST + b'{"a": [2]}\n', up=True)  # the next request on the same connection
    wire.send(300.0, HEAD + _event(2))
    wire.send(320.0, _event(2) + _event(2, usage=True) + DONE)
    packets = wire.packets[:6] + wire.packets[7:] + [wire.packets[6]]  # captured out of order too
    first, second_ex = w.exchanges(packets, SERVER[1])
    assert (first.method, first.path, first.order, first.status) == ("POST", "/v1/completions", 0, 200)
    assert (first.request_ns, first.request_end_ns) == (0, 500_000)
    assert first.events_ns == [100_000_000, 121_000_000] and first.tag == 1 and first.done and first.gaps == 0
    assert second_ex.order == 1 and second_ex.request_ns == 200_000_000 and second_ex.tag == 2
    assert second_ex.events_ns == [300_000_000, 320_000_000]


def test_chat_chunks_bear_tokens_only_with_content_and_holes_are_counted():
    wire = Wire(("127.0.0.1", 40002))
    wire.send(0.0, REQUEST.replace(b"/v1/completions", b"/v1/chat/completions") + b'{"a": [1]}\n', up=True)
    role = b'data: {"id": "chatcmpl-9", "choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n'
    token = b'data: {"id": "chatcmpl-9", "choices": [{"delta": {"content": "hi"}}]}\n\n'
    wire.send(50.0, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + role + token)
    wire.seq["down"] += 100  # a segment the capture lost
    wire.send(70.0, token + b"data: [DONE]\n\n")
    (ex,) = w.exchanges(wire.packets, SERVER[1])
    assert ex.events_ns == [50_000_000, 70_000_000] and ex.tag == 9 and ex.done and ex.gaps == 1


def test_parse_ip_reads_endpoints_and_payload_and_skips_empty_segments():
    packet = w.parse_ip(5, _ip(CLIENT, SERVER, 42, b"hello"))
    assert packet == w.Packet(5, CLIENT, SERVER, 42, b"hello")
    assert w.parse_ip(5, _ip(CLIENT, SERVER, 42, b"")) is None  # a bare ACK
    assert w.parse_ip(5, b"\x60" + bytes(50)) is None  # IPv6


def test_capture_file_round_trip(tmp_path):
    path = tmp_path / "cap"
    raw = _ip(CLIENT, SERVER, 7, b"abc")
    path.write_bytes(struct.pack("<qI", 123, len(raw)) + raw)
    assert w.read_packets(path) == [w.Packet(123, CLIENT, SERVER, 7, b"abc")]


def test_bpf_program_jumps_land_inside_it():
    prog = w.bpf_program(8000)
    assert prog[-1] == (0x06, 0, 0, 0) and prog[-2] == (0x06, 0, 0, w.SNAP)
    for i, (code, jt, jf, _k) in enumerate(prog):
        if code == 0x15:
            assert i + 1 + jt < len(prog) and i + 1 + jf < len(prog)


def test_matching_by_stream_number_else_by_order():
    ex = [
        w.Exchange(CLIENT, k, "POST", "/v1/completions", 10 * k, 10 * k, 200, [10 * k + 5], tag=k + 1) for k in range(3)
    ]
    reqs = [w.ClientRequest(10 * k - 1, [10 * k + 6], tag=k + 1) for k in (2, 0, 1)]
    assert [(r.tag, e.tag) for r, e in w.match(reqs, ex)] == [(3, 3), (1, 1), (2, 2)]
    untagged = [w.ClientRequest(10 * k - 1, [10 * k + 6]) for k in (2, 1)]  # the last two streams, in send order
    assert [e.tag for _r, e in w.match(untagged, ex)] == [2, 3]


def test_clock_map_interpolates_between_readings():
    clocks = w.ClockMap((1_000, 10), (2_000, 1_010))  # the wall clock ran at the monotonic clock's rate
    assert clocks.mono(1_500) == 510
    slewed = w.ClockMap((1_000, 10), (2_001, 1_010))
    assert slewed.mono(2_001) == 1_010
    real, mono = w.clock_pair()
    assert abs(real - time.time_ns()) < 10**9 and mono <= time.perf_counter_ns()


@pytest.mark.skipif(os.geteuid() != 0 or not hasattr(socket, "AF_PACKET"), reason="AF_PACKET capture needs root")
def test_a_real_capture_of_the_mock(tmp_path: Path):
    # tokens far apart: one segment each
    server = mock_openai.start(mock_openai.Shape(ttft_ms=20.0, tpot_ms=15.0, tokens=3))
    before = w.clock_pair()
    try:
        with w.Capturing(server.port, tmp_path / "cap") as cap:
            sent = []
            for _ in range(2):
                sent.append(time.perf_counter_ns())
                body = json.dumps({"model": "mock", "prompt": [1], "max_tokens": 3, "stream": True}).encode()
                req = urllib.request.Request(server.url + "/completions", data=body)
                urllib.request.urlopen(req, timeout=10).read()
    finally:
        mock_openai.stop(server.process)
    clocks = w.ClockMap(before, w.clock_pair())
    assert cap.stats()["kernel_drops"] == 0
    found = [e for e in w.exchanges(w.read_packets(tmp_path / "cap"), server.port) if e.method == "POST"]
    assert [e.tag for e in found] == [1, 2] and all(e.done and len(e.events_ns) == 3 for e in found)
    for t0, e in zip(sent, found, strict=True):
        assert t0 < clocks.mono(e.request_ns) < clocks.mono(e.events_ns[0])  # sent, on the wire, answered
        # the mock's 20 ms to the first token, less the millisecond its loop's timer may fire early (uvloop)
        assert e.events_ns[0] - e.request_ns >= 19_000_000
