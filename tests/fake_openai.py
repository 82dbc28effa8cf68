"""A fake OpenAI-compatible server for client tests: HTTP/1.1 keep-alive, chunked SSE like uvicorn's, on 127.0.0.1.

Completions (and chat completions) stream ``max_tokens`` chunks, ``ttft_s`` after the request and
``itl_s`` apart, then a usage chunk and ``[DONE]``. The server keeps what a test checks from the
outside: every request body, its arrival stamp (``perf_counter_ns``: the same CLOCK_MONOTONIC as the
client's processes), the most requests it had in flight, and the peer of each connection.
``/tokenize`` answers with one id per character when ``tokenize`` is on. With ``max_model_len`` it is a
vLLM 0.32 server of that context (:func:`mock_openai.context_refusal`): ``/v1/models`` publishes it (unless
``publish_context`` is off), a prompt that does not fit is answered HTTP 400 with vLLM's body, and a shorter
one's output is cut to what fits.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mock_openai import context_refusal, fitted_tokens


@dataclass
class Seen:
    """What the server saw."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrivals_ns: list[int] = field(default_factory=list)
    peers: list[tuple[str, int]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)  # each request's Authorization header
    in_flight: int = 0
    peak_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        return None

    def _json(self, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        server: FakeServer = self.server  # type: ignore[assignment]
        published = server.max_model_len if server.publish_context else None
        self._json(200, {"data": [{"id": "fake", **({"max_model_len": published} if published else {})}]})

    def do_POST(self) -> None:
        server: FakeServer = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path.endswith("/tokenize"):
            if not server.tokenize:
                return self._json(404, {"detail": "Not Found"})
            text = body.get("prompt") or "".join(m["content"] for m in body.get("messages", []))
            return self._json(200, {"tokens": [ord(c) % 1000 for c in text], "count": len(text)})
        seen = server.seen
        with seen.lock:
            seen.arrivals_ns.append(time.perf_counter_ns())
            seen.bodies.append(body)
            seen.peers.append(self.client_address[:2])
            seen.authorizations.append(self.headers.get("Authorization"))
            seen.in_flight += 1
            seen.peak_in_flight = max(seen.peak_in_flight, seen.in_flight)
        refusal = context_refusal(body, server.max_model_len)
        self._counted = True
        try:
            if refusal is not None:
                return self._json(400, refusal)
            self._stream(server, body, self.path.endswith("/chat/completions"))
        finally:
            self._leave(seen)

    def _leave(self, seen: Seen) -> None:
        """The request is no longer in flight: said before its last bytes go out (a client that has them may send
        the next request at once, before this thread runs again), once."""
        if self._counted:
            self._counted = False
            with seen.lock:
                seen.in_flight -= 1

    def _stream(self, server: FakeServer, body: dict[str, Any], chat: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        n = fitted_tokens(body, int(body.get("max_tokens", 4)), server.max_model_len)
        time.sleep(server.ttft_s)
        for i in range(n):
            if i:
                time.sleep(server.itl_s)
            piece = {"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "}
            chunk(b"data: " + json.dumps({"choices": [piece]}).encode() + b"\n\n")
        usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}
        usage["prompt_tokens_details"] = {"cached_tokens": 2}  # as vLLM with --enable-prompt-tokens-details
        self._leave(server.seen)
        chunk(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        ttft_s: float = 0.0,
        itl_s: float = 0.0,
        tokenize: bool = False,
        max_model_len: int | None = None,
        publish_context: bool = True,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.ttft_s, self.itl_s, self.tokenize = ttft_s, itl_s, tokenize
        self.max_model_len, self.publish_context = max_model_len, publish_context
        self.seen = Seen()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-stream (a cancelled request) is no error worth printing."""
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def fake_server(
    ttft_s: float = 0.0,
    itl_s: float = 0.0,
    tokenize: bool = False,
    max_model_len: int | None = None,
    publish_context: bool = True,
) -> Iterator[FakeServer]:
    """A running :class:`FakeServer` for the block (a thread of this process; stopped after it)."""
    server = FakeServer(ttft_s, itl_s, tokenize, max_model_len, publish_context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
