"""Prompt log-likelihoods through the completions endpoint's echo + logprobs, against a small local server."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.backends.base import BackendError
from engine.backends.openai.http import Client
from engine.backends.openai.scoring import score_echo


async def _serve(answers: list[tuple[int, dict]]) -> tuple[asyncio.Server, list[dict]]:
    asked: list[dict] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            asked.append(json.loads(await reader.readexactly(length)))
            status, body = answers.pop(0)
            data = json.dumps(body).encode()
            writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(data), data))
            await writer.drain()

    return await asyncio.start_server(handle, "127.0.0.1", 0), asked


def _score(answers: list[tuple[int, dict]], sequences: list[list[int]]):  # type: ignore[no-untyped-def]
    async def main():  # type: ignore[no-untyped-def]
        server, asked = await _serve(answers)
        client = Client(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1")
        try:
            return await score_echo(client, "m", sequences, top_k=0), asked
        finally:
            client.close()
            server.close()

    return asyncio.run(main())


def test_each_sequence_is_scored_after_its_first_token() -> None:
    lp = {"choices": [{"logprobs": {"token_logprobs": [None, -1.5, -0.25, -3.0]}}]}
    [scores], asked = _score([(200, lp)], [[5, 6, 7]])
    assert scores.token_logprobs.tolist() == [-1.5, -0.25]
    assert asked == [
        {"model": "m", "prompt": [5, 6, 7], "max_tokens": 1, "echo": True, "logprobs": 1, "temperature": 0.0}
    ]


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ((400, {"error": {"message": "echo is not supported"}}), "not supported by this server: HTTP 400: echo is not"),
        ((200, {"choices": [{}]}), "no prompt logprobs"),
        ((200, {"choices": [{"logprobs": {"token_logprobs": [None, None, -1.0]}}]}), "prompt logprobs missing"),
    ],
)
def test_a_server_that_cannot_score_says_so_in_one_line(answer, words) -> None:
    with pytest.raises(BackendError, match=words):
        _score([answer], [[5, 6, 7]])
