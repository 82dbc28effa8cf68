"""LatencyLab's HTTP/1.1 client: framing, keep-alive reuse, a stamp per network read, cancellation."""

from __future__ import annotations

import asyncio
import time

import pytest
from fake_openai import fake_server

from engine.backends.asyncloop import new_loop
from engine.backends.openai.http import Client, ConnectFailed, Exchange, HttpError


def _run(coro):  # type: ignore[no-untyped-def]
    loop = new_loop(fast=True)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _exchange() -> Exchange:
    return Exchange(asyncio.new_event_loop())


def test_chunked_bodies_split_anywhere_give_the_same_pieces_and_stamps() -> None:
    body = b"data: a\n\n" * 3
    wire = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:5], body[5:]))
        + b"0\r\n\r\n"
    )
    for cut in range(1, len(wire)):
        ex = _exchange()
        assert not ex.feed(1, wire[:cut])
        assert ex.feed(2, wire[cut:]), cut
        assert ex.status == 200 and ex.keep_alive and ex.body == body
        assert {t for t, _ in ex.reads} <= {1, 2}


def test_content_length_and_http10_bodies() -> None:
    ex = _exchange()
    assert ex.feed(5, b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nab") is False
    assert ex.feed(6, b"cde") and ex.body == b"abcde" and ex.reads == [(5, b"ab"), (6, b"cde")]
    old = _exchange()
    old.feed(1, b"HTTP/1.0 200 OK\r\n\r\nall until")
    old.feed(2, b" the close")
    old.lost(None)
    assert old.done and not old.keep_alive and old.body == b"all until the close"


def test_malformed_and_compressed_answers_are_errors() -> None:
    with pytest.raises(HttpError, match="malformed HTTP status line"):
        _exchange().feed(1, b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(HttpError, match="compressed responses are not supported"):
        _exchange().feed(1, b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(HttpError, match="malformed chunked body"):
        _exchange().feed(1, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")


def test_keep_alive_connections_are_reused_and_each_read_is_stamped() -> None:
    with fake_server(ttft_s=0.0, itl_s=0.02) as server:
        client = Client(server.base_url, {"Content-Type": "application/json"})

        async def two() -> list[Exchange]:
            out = []
            for _ in range(2):
                ex = await client.request("POST", "/completions", b'{"max_tokens": 4}')
                await client.read(ex)
                out.append(ex)
            return out

        first, second = _run(two())
        client.close()
    assert server.seen.peers[0] == server.seen.peers[1]  # one connection for both
    stamps = sorted({t for t, _ in first.reads})
    # the server paces its 4 tokens 20 ms apart: the reads carry stamps of their own, spread over that pacing (on
    # a loaded machine two token events may still arrive in one read, so no gap between reads is asserted)
    assert len(stamps) >= 2 and stamps[-1] - stamps[0] >= 40_000_000
    assert first.sent_ns < stamps[0] and second.body.count(b"data: ") == 6  # 4 tokens, usage, [DONE]


def test_a_cancelled_read_closes_the_connection_and_keeps_what_arrived() -> None:
    with fake_server(ttft_s=0.0, itl_s=0.01) as server:
        client = Client(server.base_url)

        async def cut() -> Exchange:
            ex = await client.request("POST", "/completions", b'{"max_tokens": 500}')
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.1):
                    await client.read(ex)
            return ex

        ex = _run(cut())
        client.close()
    assert not ex.done and 2 < ex.body.count(b"data: ") < 500


def test_connections_opened_ahead_carry_the_next_requests() -> None:
    """``open(n)``: n idle connections before anything is sent; requests at once then take one each, and a
    connection that cannot be opened is left to the request that needs it."""
    with fake_server(ttft_s=0.0, itl_s=0.0) as server:
        client = Client(server.base_url, {"Content-Type": "application/json"})

        async def three() -> int:
            ready = await client.open(3)
            assert await client.open(2) == 3  # enough already: nothing more is opened
            exchanges = await asyncio.gather(
                *(client.request("POST", "/completions", b'{"max_tokens": 2}') for _ in range(3))
            )
            for ex in exchanges:
                await client.read(ex)
            return ready

        assert _run(three()) == 3
        client.close()
    assert len(server.seen.peers) == 3 and len(set(server.seen.peers)) == 3  # one opened connection each
    nobody = Client("http://127.0.0.1:9/v1")
    assert _run(nobody.open(2)) == 0


def test_no_server_is_a_connect_failure() -> None:
    client = Client("http://127.0.0.1:9/v1")
    t0 = time.perf_counter()
    with pytest.raises(ConnectFailed) as err:
        _run(client.request("GET", "/models"))
    assert "127.0.0.1:9" in str(err.value) and time.perf_counter() - t0 < 5


def test_token_events_are_stamped_when_they_arrived_even_while_the_loop_was_busy() -> None:
    """Plain HTTP reads carry the kernel's receive stamps: a loop blocked for 300 ms while three token events
    arrive 60 ms apart stamps the last as it arrived (about 120 ms after the send), not as the loop got to it.
    (Packets the kernel merged while nobody read share the newest one's stamp: that is all it keeps.)"""
    with fake_server(ttft_s=0.0, itl_s=0.06) as server:
        client = Client(server.base_url)

        async def busy() -> tuple[Exchange, int]:
            ex = await client.request("POST", "/completions", b'{"max_tokens": 3}')
            time.sleep(0.3)  # the loop does nothing else meanwhile: no read happens
            woke = time.perf_counter_ns()
            await client.read(ex)
            return ex, woke

        ex, woke = _run(busy())
        client.close()
    assert client.kernel_stamps
    events = [t for t, data in ex.reads if b'"choices": [{' in data]
    assert len(events) == 3 and events == sorted(events), ex.reads
    assert 100_000_000 < events[-1] - ex.sent_ns < 250_000_000  # the third token's arrival, 120 ms after the send
    assert woke - events[-1] > 40_000_000  # well before the loop woke to read it


def test_a_server_that_does_not_answer_holds_the_phase_start_back_only_so_long(monkeypatch) -> None:
    """Connections a phase opens ahead get at most OPEN_WAIT_S: past it the requests connect themselves."""
    import socket

    from engine.backends.openai import backend as openai_backend

    monkeypatch.setattr(openai_backend, "OPEN_WAIT_S", 0.5)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)  # never accepts: once its queue is full, handshakes go unanswered
    client = openai_backend.OpenAIBackend()
    client.configure(f"http://127.0.0.1:{silent.getsockname()[1]}/v1", "fake", "completions", None)
    try:
        t0 = time.perf_counter()
        client.run(client.open_connections(64))
        assert time.perf_counter() - t0 < 3
    finally:
        client.unload()
        silent.close()
