"""The benchmark's mock OpenAI server (tests/mock_openai.py): its streams' shape and timing, in its own process."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from engine.backends.base import Request
from engine.backends.openai.backend import OpenAIBackend
from engine.measure.records import RequestRecord
from tests import mock_openai


@pytest.fixture(scope="module")
def mock() -> Iterator[mock_openai.Running]:
    running = mock_openai.start(mock_openai.Shape(ttft_ms=40.0, tpot_ms=5.0, tokens=4))
    yield running
    mock_openai.stop(running.process)
    assert running.process.returncode == 0  # SIGTERM ends it cleanly


def _post(url: str, body: dict) -> tuple[float, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Transfer-Encoding"] == "chunked"
        first = resp.read1(65536)  # the first chunk arrives with the first token
        elapsed = time.perf_counter() - t0
        return elapsed, first + resp.read()


def _events(body: bytes) -> list[bytes]:
    return [line[6:] for line in body.split(b"\n\n") if line.startswith(b"data: ")]


def test_stream_events_are_framed_and_tagged():
    one, last, tail = mock_openai.stream_events(7, tokens=3, chat=False)
    size, _, rest = one.partition(b"\r\n")
    assert int(size, 16) == len(rest) - 2 and rest.endswith(b"\n\n\r\n")
    assert json.loads(rest[6:-4])["id"] == "cmpl-7" and b'"finish_reason":"length"' in last
    usage = json.loads(tail.split(b"\r\n")[1][6:])["usage"]
    assert usage == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert tail.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
    _one, _last, untagged = mock_openai.stream_events(7, tokens=3, chat=True, tag_usage=False)
    assert b'"prompt_tokens":1' in untagged and b'"delta":{"content":" tok"}' in _one


def test_models_and_unknown_routes(mock):
    with urllib.request.urlopen(mock.url + "/models", timeout=5) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == mock_openai.MODEL
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(mock.url + "/nowhere", timeout=5)


def test_completions_stream_timing_and_shape(mock):
    elapsed, body = _post(
        mock.url + "/completions", {"model": "mock", "prompt": [1, 2], "max_tokens": 99, "stream": True}
    )
    assert elapsed >= 0.040  # the first token comes after --ttft-ms
    events = _events(body)
    assert len(events) == 6 and events[-1] == b"[DONE]"  # 4 tokens (--tokens wins over max_tokens), usage, [DONE]
    tokens = [json.loads(e) for e in events[:4]]
    assert {t["id"] for t in tokens} == {tokens[0]["id"]} and tokens[0]["choices"][0]["text"] == " tok"
    assert json.loads(events[4])["usage"]["completion_tokens"] == 4
    _, chat = _post(mock.url + "/chat/completions", {"model": "mock", "messages": [], "stream": True})
    assert json.loads(_events(chat)[0])["choices"][0]["delta"]["content"] == " tok"


def test_our_client_streams_from_it_and_keeps_each_streams_number(mock):
    backend = OpenAIBackend()
    backend.configure(mock.url, mock_openai.MODEL, "completions", None)
    records = [RequestRecord(index=i, arrival_ns=0, send_ns=0, prompt_tokens=2) for i in range(3)]
    try:
        t0 = time.perf_counter_ns()
        backend.run(backend.stream([Request(prompt=[1, 2], max_new_tokens=4)] * 3, records))
    finally:
        backend.unload()
    assert [r.output_tokens for r in records] == [4, 4, 4]
    assert len({r.prompt_tokens for r in records}) == 3  # the stream numbers, as the server's prompt count
    for r in records:  # 40 ms to the first token, at the earliest (the mock sends late, never early)
        assert r.chunk_ns[0] - t0 >= 40_000_000
