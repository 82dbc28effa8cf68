"""Issue 13 item 1: failed requests against a fake OpenAI-compatible server (no model).

Every request failed -> the run is failed with the first reasons and the CLI exits 1;
some failed -> done with ``error_rate``; ``--max-error-rate`` fails a run above it; only
request-level errors are per request, anything else ends the run as failed.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from engine.cli.main import main
from tests.engine.backends.test_openai_backend import _Handler


class _Worse(_Handler):
    """The shared fake server plus the failures it lacks: garbage, a hang, a 500, a flaky model."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        body = json.loads(raw)
        model = body.get("model")
        if model == "garbage":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>this is not an event stream</html>\n")
            return None
        if model == "hang":
            time.sleep(4)
            return None
        if model == "boom":
            return self._send_json(500, {"error": {"message": "internal boom"}})
        if model == "flaky":
            with self.server.lock:  # type: ignore[attr-defined]
                self.server.count += 1  # type: ignore[attr-defined]
                fail = self.server.count % 2 == 0  # type: ignore[attr-defined]
            if fail:
                return self._send_json(503, {"error": {"message": "overloaded"}})
            raw = json.dumps({**body, "model": "ok"}).encode()  # served by the shared handler
            self.headers.replace_header("Content-Length", str(len(raw)))
        self.rfile = io.BytesIO(raw)  # the shared handler reads the body again
        return super().do_POST()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, ThreadingHTTPServer]]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Worse)
    srv.daemon_threads = True
    srv.bodies, srv.count, srv.lock = [], 0, threading.Lock()  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", srv
    srv.shutdown()
    srv.server_close()


def _metrics(db_url: str, run_id: int) -> dict:
    """The stored metrics (the result object's columns are the report's business)."""
    from storage import open_database
    from storage.runs import get_run

    return get_run(open_database(db_url), run_id).metrics


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(db_url: str, base_url: str, model: str, *extra: str) -> list[str]:
    return [
        "run", "--db", db_url, "--json", "--model", "synthetic:smollm2-135m", "--engine", "openai",
        "--base-url", base_url, "--served-model", model, "--prompt-tokens", "4", "--output-tokens", "3",
        "--requests", "2", "--warmup", "0", "--arrival", "max", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "extra", "reason"),
    [
        ("missing", (), "HTTP 404"),
        ("boom", (), "HTTP 500: internal boom"),
        ("garbage", (), "malformed SSE line"),
        ("early", (), "stream closed early"),
        ("malformed", (), "malformed SSE data"),
        ("hang", ("--knob", "timeout_s=1"), "timed out after 1 s"),
    ],
)
def test_every_request_failed_is_a_failed_run_and_exit_1(server, db_url, capsys, model, extra, reason) -> None:
    assert main(_run(db_url, server[0], model, *extra)) == 1
    captured = capsys.readouterr()
    obj = json.loads(captured.out)
    assert obj["status"] == "failed" and reason in obj["error"] and "every request failed (2 of 2)" in obj["error"]
    assert obj["failed"] == 2 and obj["completed"] == 0 and _metrics(db_url, obj["run_id"])["error_rate"] == 1.0
    assert f"failed: every request failed (2 of 2): {reason}" in captured.err


def test_unreachable_server_is_a_failed_run(db_url, capsys) -> None:
    assert main(_run(db_url, f"http://127.0.0.1:{_free_port()}/v1", "x")) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["status"] == "failed" and "cannot connect to" in obj["error"]


def test_some_failed_is_done_with_the_error_rate_and_max_error_rate_fails_it(server, db_url, capsys) -> None:
    args = _run(db_url, server[0], "flaky")
    args[args.index("--requests") + 1] = "4"
    assert main(args) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["status"] == "done" and obj["completed"] == 2 and obj["failed"] == 2
    assert _metrics(db_url, obj["run_id"])["error_rate"] == 0.5
    assert main([*args, "--max-error-rate", "0.25"]) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["status"] == "failed" and "above the maximum error rate of 25%" in obj["error"]
    assert "HTTP 503: overloaded" in obj["error"] and _metrics(db_url, obj["run_id"])["error_rate"] == 0.5
    assert main([*args, "--max-error-rate", "0.5"]) == 0  # at the limit is not above it


def test_max_error_rate_is_validated_and_keeps_old_fingerprints(capsys) -> None:
    from engine.spec import parse_job_spec

    assert main(["run", "--model", "demo", "--max-error-rate", "1.5"]) == 2
    assert "max_error_rate" in capsys.readouterr().err
    plain = parse_job_spec({"model": {"source": "demo"}})
    assert plain.fingerprint() == parse_job_spec({"model": {"source": "demo"}, "workload": {}}).fingerprint()
    limited = parse_job_spec({"model": {"source": "demo"}, "workload": {"max_error_rate": 0.1}})
    assert limited.fingerprint() != plain.fingerprint()


def test_an_engine_error_that_is_not_a_request_error_ends_the_run(server, db, monkeypatch) -> None:
    from engine.backends.openai.backend import OpenAIBackend
    from engine.run.runner import BenchmarkFailed, run_benchmark
    from engine.spec import parse_job_spec
    from storage.runs import get_run

    async def dead(self, batch, records):  # type: ignore[no-untyped-def]
        raise RuntimeError("engine core died")

    monkeypatch.setattr(OpenAIBackend, "stream", dead)
    spec = parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "recipe": {"engine": "openai", "base_url": server[0], "model_name": "ok"},
            "workload": {"prompt_tokens": 4, "output_tokens": 3, "requests": 2, "warmup_requests": 0},
        }
    )
    with pytest.raises(BenchmarkFailed, match="RuntimeError: engine core died") as exc:
        run_benchmark(spec, db=db, log=lambda _m: None)
    assert get_run(db, exc.value.run_id).status == "failed"
