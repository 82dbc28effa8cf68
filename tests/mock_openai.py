"""A mock OpenAI-compatible streaming server for the client benchmark and its tests (never a user's path).

It serves what a vLLM server looks like to a client, with no model behind it:
``GET /v1/models``, and ``POST /v1/completions`` and ``/v1/chat/completions`` streamed as SSE
over HTTP/1.1 keep-alive with chunked transfer encoding (as uvicorn sends them). Every stream
has the same shape: its first token ``--ttft-ms`` after the request's body arrived, then one
token every ``--tpot-ms``, ``--tokens`` tokens (0: the request's ``max_tokens``), one SSE event
per token (written on its own, so each is a TCP segment of its own), then a usage event and
``data: [DONE]``. Token times are due from the request's arrival; a server running late sends
what is due at once, as an overloaded engine would.

Each stream carries its number on the wire: ``"id": "cmpl-<n>"`` in every event, and
``usage.prompt_tokens`` is ``n`` too (``--tag-usage``, on by default), so a client that keeps
the server's prompt count (ours, ``vllm bench serve``) stores it beside its own stamps, and
``benchmarks/client_at_scale.py`` matches each client request to its stream in the capture.

    python -m tests.mock_openai [--port 0] [--ttft-ms 100] [--tpot-ms 20] [--tokens 32] [--max-model-len N]

With ``--max-model-len N`` it behaves as vLLM 0.32 with that context: ``/v1/models`` publishes
``max_model_len``, a prompt of N tokens or more (ids counted one each, text one per character) is
answered HTTP 400 with vLLM's error body (:func:`context_refusal`), and a shorter prompt's output is cut
to what fits, silently, as vLLM's ``get_max_tokens`` does.

prints ``PORT <n>`` on stdout once it listens (127.0.0.1 only) and stops on SIGTERM or SIGINT.
:func:`start` runs it as a child process and :func:`stop` ends it by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "mock"


@dataclass(frozen=True)
class Shape:
    """Every stream's timing and length."""

    ttft_ms: float = 100.0
    tpot_ms: float = 20.0
    tokens: int = 32  # 0: the request's max_tokens
    tag_usage: bool = True
    max_model_len: int | None = None  # vLLM's context: published, long prompts refused (module doc)


def prompt_tokens(body: dict) -> int:
    """A request's prompt length as the mocks count it: token ids one each, text one per character."""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        return len(prompt)
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(str(m.get("content") or "")) for m in body.get("messages") or [] if isinstance(m, dict))


def context_refusal(body: dict, max_model_len: int | None) -> dict | None:
    """vLLM 0.32's HTTP 400 body for a prompt beyond ``max_model_len`` (None: the prompt fits, or no limit)."""
    n = prompt_tokens(body)
    if max_model_len is None or n < max_model_len:
        return None
    if n > max_model_len:  # vllm/renderers/params.py _token_len_check
        message = (
            f"This model's maximum context length is {max_model_len} tokens. However, your prompt contains {n} "
            "input tokens, which exceeds this limit even without any output tokens. Please reduce the length of "
            f"the input prompt. (parameter=input_tokens, value={n})"
        )
    else:  # vllm/v1/engine/input_processor.py: a prompt of exactly max_model_len leaves no room for output
        message = (
            f"The decoder prompt (length {n}) plus the number of requested output tokens (at least 1) is longer "
            f"than the maximum model length of {max_model_len}. Make sure that `max_model_len` is no smaller than "
            "the number of text tokens (prompt + requested output tokens)."
        )
    return {"error": {"message": message, "type": "BadRequestError", "param": "input_tokens", "code": 400}}


def fitted_tokens(body: dict, tokens: int, max_model_len: int | None) -> int:
    """The output a vLLM server gives: ``tokens``, cut to what fits beside the prompt (vLLM's get_max_tokens)."""
    return tokens if max_model_len is None else min(tokens, max_model_len - prompt_tokens(body))


def _chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (chunked transfer encoding)."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def stream_events(n: int, tokens: int, chat: bool, tag_usage: bool = True) -> tuple[bytes, bytes, bytes]:
    """(one token event, the last token event, usage + [DONE] + the end of the body) of stream ``n``."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    head = {"id": f"cmpl-{n}", "object": kind, "created": 0, "model": MODEL}

    def token(finish: str | None) -> bytes:
        choice = {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok", "logprobs": None}
        return _event({**head, "choices": [{**choice, "finish_reason": finish}]})

    prompt = n if tag_usage else 1
    usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
    tail = _event({**head, "choices": [], "usage": usage}) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    return token(None), token("length"), tail


class MockServer:
    """The asyncio server; ``requests`` counts the streams it started."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests in turn (keep-alive) until the client closes it."""
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        arrived = time.monotonic()
        lines = head.decode("latin-1").split("\r\n")
        method, path = (lines[0].split(" ") + ["", ""])[:2]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        length = int(headers.get("content-length") or 0)
        body = await reader.readexactly(length) if length else b""
        if method == "GET" and path.rstrip("/").endswith("/models"):
            card = {"id": MODEL, "object": "model"}
            if self.shape.max_model_len:
                card["max_model_len"] = self.shape.max_model_len
            await self._json(writer, 200, {"object": "list", "data": [card]})
        elif method == "POST" and path.rstrip("/").endswith("completions"):
            request = json.loads(body or b"{}")
            refusal = context_refusal(request, self.shape.max_model_len)
            if refusal is not None:
                await self._json(writer, 400, refusal)
            else:
                await self._stream(writer, request, path.rstrip("/").endswith("chat/completions"), arrived)
        else:
            await self._json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
        return headers.get("connection", "").lower() != "close"

    async def _json(self, writer: asyncio.StreamWriter, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        writer.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (status, {200: b"OK", 400: b"Bad Request"}.get(status, b"Not Found"), len(body), body)
        )
        await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter, body: dict, chat: bool, arrived: float) -> None:
        self.requests += 1
        n = self.requests
        tokens = fitted_tokens(body, self.shape.tokens or int(body.get("max_tokens") or 16), self.shape.max_model_len)
        one, last, tail = stream_events(n, tokens, chat, self.shape.tag_usage)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        first_s, step_s = self.shape.ttft_ms / 1000, self.shape.tpot_ms / 1000
        for k in range(tokens):
            delay = arrived + first_s + k * step_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(last if k == tokens - 1 else one)
            await writer.drain()
        writer.write(tail)
        await writer.drain()


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(shape: Shape, port: int = 0, announce: bool = True) -> None:
    """Listen on 127.0.0.1:``port`` until SIGTERM/SIGINT; print ``PORT <n>`` once listening."""
    mock = MockServer(shape)
    server = await asyncio.start_server(mock.handle, "127.0.0.1", port, backlog=4096, limit=2**20)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if announce:
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    """The command line (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--tpot-ms", type=float, default=20.0)
    ap.add_argument("--tokens", type=int, default=32, help="tokens per stream; 0: the request's max_tokens")
    ap.add_argument("--no-tag-usage", action="store_true", help="report prompt_tokens 1, not the stream's number")
    ap.add_argument("--max-model-len", type=int, default=None, help="vLLM's context: published, long prompts refused")
    args = ap.parse_args(argv)
    _raise_fd_limit()
    shape = Shape(args.ttft_ms, args.tpot_ms, args.tokens, not args.no_tag_usage, args.max_model_len)
    try:
        import uvloop

        uvloop.run(serve(shape, args.port))
    except ImportError:
        asyncio.run(serve(shape, args.port))


@dataclass
class Running:
    """A mock server started by :func:`start`: its base URL (``.../v1``), port and process."""

    url: str
    port: int
    process: subprocess.Popen


def start(shape: Shape = Shape(), timeout_s: float = 30.0) -> Running:
    """Run the mock in a child process (its own interpreter, so it shares no GIL with the client)."""
    cmd = [sys.executable, "-m", "tests.mock_openai", "--ttft-ms", str(shape.ttft_ms), "--tpot-ms", str(shape.tpot_ms)]
    cmd += ["--tokens", str(shape.tokens)] + ([] if shape.tag_usage else ["--no-tag-usage"])
    cmd += ["--max-model-len", str(shape.max_model_len)] if shape.max_model_len else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT ") or time.monotonic() > deadline:
        stop(proc)
        raise RuntimeError(f"the mock server did not start: {line!r}")
    port = int(line.split()[1])
    return Running(f"http://127.0.0.1:{port}/v1", port, proc)


def stop(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End a child started by :func:`start`, by its PID: SIGTERM, then SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace_s)
    if proc.stdout:
        proc.stdout.close()


if __name__ == "__main__":
    main()
