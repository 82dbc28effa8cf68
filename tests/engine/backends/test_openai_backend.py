"""The OpenAI-compatible backend against a small fake SSE server on 127.0.0.1 (no model)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.backends.base import BackendError, Request
from engine.backends.openai.backend import OpenAIBackend, RequestFailed
from engine.backends.openai.recipe import OpenAIRecipe
from engine.measure.records import RequestRecord
from engine.run.driver import drive_phase
from engine.run.plan import planned
from engine.spec import ModelSpec, Workload, parse_job_spec
from engine.weights.models import ResolvedModel

API_KEY = "sk-test-secret"


class _Handler(BaseHTTPRequestHandler):
    """Behaviour picked by the requested model name."""

    protocol_version = "HTTP/1.0"  # the body ends when the connection closes

    def log_message(self, *args: object) -> None:  # quiet
        return None

    def _send_json(self, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send_json(200, {"data": [{"id": "ok"}, {"id": "double"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model, n = body["model"], body["max_tokens"]
        self.server.bodies.append(body)  # type: ignore[attr-defined]
        if model == "auth" and self.headers.get("Authorization") != f"Bearer {API_KEY}":
            return self._send_json(401, {"error": {"message": "invalid API key"}})
        if model not in ("ok", "double", "nousage", "malformed", "early", "auth", "chat"):
            return self._send_json(404, {"error": {"message": f"The model `{model}` does not exist."}})
        if model == "ok" and body.get("prompt") == [666]:
            return self._send_json(500, {"error": {"message": "internal boom"}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chat = self.path.endswith("/chat/completions")

        def event(obj: object) -> None:
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(0.002)  # tokens apart in time, so every chunk gets its own read and stamp

        if chat:
            event({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
        chunks = n // 2 if model == "double" else n
        for i in range(chunks):
            if model == "early" and i == 2:
                return  # connection closes without [DONE]
            if model == "malformed" and i == 1:
                self.wfile.write(b"data: {not json\n\n")
                return
            choice = {"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "}
            event({"choices": [choice]})
        if model != "nousage":
            event({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": n + 7}})
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture(scope="module")
def fake_server() -> Iterator[tuple[str, ThreadingHTTPServer]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", server
    server.shutdown()
    server.server_close()


def _backend(url: str, model: str = "ok", endpoint: str = "completions", key: str | None = None) -> OpenAIBackend:
    b = OpenAIBackend()
    b.configure(url, model, endpoint, key)
    return b


def _one(b: OpenAIBackend, prompt: list[int], n: int = 6) -> RequestRecord:
    rec = RequestRecord(index=0, arrival_ns=0, send_ns=0, prompt_tokens=len(prompt))
    b.run(b.stream([Request(prompt=prompt, max_new_tokens=n)], [rec]))
    return rec


def test_normal_stream_counts_usage_and_stamps(fake_server) -> None:
    url, server = fake_server
    b = _backend(url)
    try:
        rec = _one(b, [1, 2, 3], n=6)
    finally:
        b.unload()
    assert rec.chunk_tokens == [1] * 6 and rec.output_tokens == 6
    assert rec.chunk_ns == sorted(rec.chunk_ns) and len(set(rec.chunk_ns)) >= 3  # reads may coalesce under load
    assert rec.prompt_tokens == 7  # the server's usage wins
    body = server.bodies[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["prompt"] == [1, 2, 3]


def test_usage_spreads_several_tokens_per_chunk(fake_server) -> None:
    b = _backend(fake_server[0], "double")
    try:
        rec = _one(b, [1], n=8)
    finally:
        b.unload()
    assert len(rec.chunk_ns) == 4 and rec.chunk_tokens == [2, 2, 2, 2]


def test_missing_usage_falls_back_and_is_flagged(fake_server) -> None:
    b = _backend(fake_server[0], "nousage")
    try:
        rec = _one(b, [1], n=5)
        assert rec.output_tokens == 5
        assert b.info()["output_tokens_source"] == {"usage": 0, "tokenizer": 0, "chunks": 1}
    finally:
        b.unload()


def test_chat_endpoint_skips_role_chunk(fake_server) -> None:
    b = _backend(fake_server[0], "chat", endpoint="chat")
    b._tokenizer = type("Tok", (), {"decode": staticmethod(lambda ids: "hello")})()
    try:
        rec = _one(b, [1, 2], n=4)
    finally:
        b.unload()
    assert rec.output_tokens == 4 and len(rec.chunk_ns) == 4
    assert fake_server[1].bodies[-1]["messages"] == [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(
    ("model", "prompt", "reason"),
    [
        ("missing", [1], "HTTP 404: The model `missing` does not exist."),
        ("ok", [666], "HTTP 500: internal boom"),
        ("auth", [1], "HTTP 401: invalid API key"),
        ("malformed", [1], "malformed SSE data"),
        ("early", [1], "stream closed early"),
    ],
)
def test_failures_have_reasons(fake_server, model: str, prompt: list[int], reason: str) -> None:
    b = _backend(fake_server[0], model)
    try:
        with pytest.raises(RequestFailed, match=reason.replace("(", r"\(").replace("`", ".")):
            _one(b, prompt)
    finally:
        b.unload()


def test_api_key_is_sent_from_the_named_variable(fake_server, monkeypatch) -> None:
    monkeypatch.setenv("LL_TEST_KEY", API_KEY)
    b = OpenAIBackend()
    recipe = OpenAIRecipe(base_url=fake_server[0], model_name="auth", api_key_env="LL_TEST_KEY")
    model = ResolvedModel(spec=ModelSpec(source="synthetic:smollm2-135m"), label="x", path=None, synthetic_config={})
    try:
        b.load(model, recipe, "cpu", lambda *_: None)
        assert _one(b, [1], n=3).output_tokens == 3
        assert API_KEY not in json.dumps(b.info())
    finally:
        b.unload()


def test_missing_api_key_variable_fails_clearly(monkeypatch) -> None:
    monkeypatch.delenv("LL_NOT_SET_KEY", raising=False)
    recipe = OpenAIRecipe(base_url="http://127.0.0.1:9/v1", model_name="m", api_key_env="LL_NOT_SET_KEY")
    model = ResolvedModel(spec=ModelSpec(source="synthetic:smollm2-135m"), label="x", path=None, synthetic_config={})
    with pytest.raises(BackendError, match="LL_NOT_SET_KEY is not set"):
        OpenAIBackend().load(model, recipe, "cpu", lambda *_: None)


def test_api_key_env_must_be_a_name_not_a_key() -> None:
    with pytest.raises(Exception, match="NAME of an environment variable"):
        OpenAIRecipe(base_url="http://x/v1", model_name="m", api_key_env="sk-abc-123")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_url_fails_every_request_and_the_run_completes() -> None:
    b = _backend(f"http://127.0.0.1:{_free_port()}/v1")
    wl = Workload(requests=3, arrival="max")
    try:
        result = drive_phase(b, planned([[1], [2], [3]], 4), wl)
    finally:
        b.unload()
    assert len(result.records) == 3
    assert all(r.error and r.error.startswith("cannot connect to") for r in result.records)


def test_mixed_run_counts_failures(fake_server) -> None:
    b = _backend(fake_server[0])
    wl = Workload(requests=4, arrival="poisson", rate=200.0, max_concurrency=2)
    try:
        result = drive_phase(b, planned([[1], [666], [2], [3]], 3), wl)
    finally:
        b.unload()
    errors = [r.error for r in result.records]
    assert errors.count(None) == 3 and errors[1] == "HTTP 500: internal boom"
    assert result.stats["peak_concurrency"] <= 2 and result.stats["configured_rate"] == 200.0
    assert all(r.send_ns >= r.arrival_ns for r in result.records)


def test_end_to_end_run_against_the_fake_server(fake_server, db) -> None:
    from engine.run.runner import run_benchmark

    spec = parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "recipe": {"engine": "openai", "base_url": fake_server[0], "model_name": "ok"},
            "workload": {
                "prompt_tokens": 4,
                "output_tokens": 5,
                "requests": 6,
                "warmup_requests": 1,
                "arrival": "poisson",
                "rate": 100.0,
                "slo_ttft_ms": 10_000,
            },
        }
    )
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    m = result.metrics
    assert m["completed"] == 6 and m["failed"] == 0 and m["total_output_tokens"] == 30
    assert m["goodput_fraction"] == 1.0 and m["load"]["configured_rate"] == 100.0
    assert m["warmup_excluded"] == 1
    # issue 13.11 / 13.6: a server the job does not manage has no known device and no visible memory
    assert result.provenance["device_name"] == "remote server (unknown device)"
    assert m["peak_memory_bytes"] is None and m["peak_memory_kind"].startswith("not measured")
    assert m["weights_memory_bytes"] is None


def test_preflight_refuses_a_missing_api_key_variable(monkeypatch) -> None:
    from engine.run.runner import preflight
    from engine.spec import SpecError

    monkeypatch.delenv("LL_NOT_SET_KEY", raising=False)
    spec = parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "recipe": {
                "engine": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "model_name": "m",
                "api_key_env": "LL_NOT_SET_KEY",
            },
        }
    )
    with pytest.raises(SpecError, match="LL_NOT_SET_KEY is not set"):
        preflight(spec)


def test_cli_sweep_stores_one_run_per_rate(fake_server, db_url, capsys) -> None:
    from engine.cli.main import main
    from storage import open_database
    from storage.runs import list_runs

    args = [
        "sweep",
        "--db",
        db_url,
        "--json",
        "--model",
        "synthetic:smollm2-135m",
        "--engine",
        "openai",
        "--base-url",
        fake_server[0],
        "--served-model",
        "ok",
        "--prompt-tokens",
        "4",
        "--output-tokens",
        "3",
        "--requests",
        "4",
        "--warmup",
        "0",
        "--rates",
        "100,inf",
        "--sweep",
        "fake-rates",
        "--slo-ttft-ms",
        "5000",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sweep"] == "fake-rates" and [p["point"] for p in out["points"]] == ["rate 100/s", "max rate"]
    assert all(p["goodput_fraction"] == 1.0 for p in out["points"])
    runs = list_runs(open_database(db_url))
    assert sorted(r.sweep for r in runs) == ["fake-rates", "fake-rates"]


def test_cli_run_json_has_load_and_failures(fake_server, db_url, capsys) -> None:
    from engine.cli.main import main

    args = [
        "run",
        "--db",
        db_url,
        "--json",
        "--model",
        "synthetic:smollm2-135m",
        "--engine",
        "openai",
        "--base-url",
        fake_server[0],
        "--served-model",
        "missing",
        "--prompt-tokens",
        "4",
        "--output-tokens",
        "3",
        "--requests",
        "2",
        "--warmup",
        "0",
        "--arrival",
        "concurrency",
        "--max-concurrency",
        "1",
    ]
    assert main(args) == 1  # every request failed: a failed run (issue 13 item 1), stored with its requests
    obj = json.loads(capsys.readouterr().out)
    assert obj["failed"] == 2 and obj["completed"] == 0 and obj["status"] == "failed"
    assert obj["load"]["arrival"] == "concurrency" and obj["load"]["max_concurrency"] == 1


def test_cli_sweep_bad_input_is_one_line(capsys) -> None:
    from engine.cli.main import main

    assert main(["sweep", "--model", "demo", "--rates", "1,x"]) == 2
    assert "--rates: 'x' is not a number" in capsys.readouterr().err
    assert main(["sweep", "--model", "demo"]) == 2
    assert "exactly one of --rates" in capsys.readouterr().err
