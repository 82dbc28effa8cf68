"""The API key never reaches an error, a log line, a stored field or a page, even when a server echoes it."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engine.secrets import REDACTED, ScrubbedStream, register, scrub, secret_env_names

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-live-7f3a9c1e5b2d4a6f8e0c"
KEY_ENV = "LATENCYLAB_TEST_ECHO_KEY"


def test_scrub_removes_registered_values_bearer_tokens_and_header_values():
    register("sk-registered-0123456789")
    text = scrub("got sk-registered-0123456789 and Bearer abc.DEF-123 and x-api-key: zz99 and api_key=q1w2e3")
    assert "sk-registered" not in text and "abc.DEF" not in text and "zz99" not in text and "q1w2e3" not in text
    assert text.count(REDACTED) == 4
    assert scrub("passed explicitly: s3cr3t-value", ["s3cr3t-value"]) == f"passed explicitly: {REDACTED}"
    assert scrub("Authorization: Basic dXNlcjpwYXNz") == f"Authorization: {REDACTED}"
    # ordinary text is left alone (short values are never registered)
    register("abc")
    assert scrub("one token per chunk; api_key_env names the variable, abc") == (
        "one token per chunk; api_key_env names the variable, abc"
    )
    assert scrub(None) is None and scrub("") == ""


def test_a_secret_cut_by_truncation_is_still_removed():
    register(KEY)
    assert scrub(f"HTTP 401: echoed {KEY[:12]}") == f"HTTP 401: echoed {REDACTED}"
    assert scrub(f"{KEY[-9:]} was the end") == f"{REDACTED} was the end"


def test_the_stream_wrapper_scrubs_every_write():
    register(KEY)
    out = io.StringIO()
    stream = ScrubbedStream(out)  # type: ignore[arg-type]
    print(f"Traceback ... Authorization: Bearer {KEY}", file=stream)
    assert KEY not in out.getvalue() and REDACTED in out.getvalue()


def test_secret_env_names_come_from_the_spec():
    assert secret_env_names({"recipe": {"engine": "openai", "api_key_env": "MY_KEY"}}) == ["MY_KEY"]
    assert secret_env_names({"recipe": {"engine": "transformers"}}) == [] and secret_env_names(None) == []


class _Echo(BaseHTTPRequestHandler):
    """A server that refuses every request and echoes its Authorization header in the 401 body."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        return None

    def _refuse(self) -> None:
        got = self.headers.get("Authorization")
        body = json.dumps({"error": {"message": f"invalid key {got!r} (header Authorization: {got})"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._refuse()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._refuse()


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _every_text_in(db_file: Path) -> str:
    con = sqlite3.connect(db_file)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return "\n".join(repr(row) for t in tables for row in con.execute(f'SELECT * FROM "{t}"'))
    finally:
        con.close()


def _page_text(node) -> str:
    parts = [str(node.proto)] if getattr(node, "proto", None) is not None else []
    for child in getattr(node, "children", {}).values():
        parts.append(_page_text(child))
    return "\n".join(parts)


@pytest.mark.slow
def test_a_job_against_an_echoing_server_stores_logs_and_shows_no_key(echo_server, db, db_url, tmp_path, monkeypatch):
    from seed_runs import open_page

    from engine.settings import get_settings
    from engine.spec import parse_job_spec
    from storage import jobs

    monkeypatch.setenv(KEY_ENV, KEY)
    spec = parse_job_spec(
        {
            "model": {"source": "synthetic:llama-3-8b"},
            "recipe": {"engine": "openai", "base_url": echo_server, "model_name": "m", "api_key_env": KEY_ENV},
            "workload": {"prompt_tokens": 8, "output_tokens": 4, "requests": 6, "warmup_requests": 0},
            "name": "echo",
        }
    )
    job_id = jobs.submit(db, spec, timeout_s=300)
    env = dict(os.environ, LATENCYLAB_DATA_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    argv = [sys.executable, "-m", "engine", "worker", "--db", db_url, "--devices", "cpu", "--once"]
    with open(tmp_path / "worker.out", "wb") as out:
        assert (
            subprocess.run(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=240).returncode == 0
        )
    job = jobs.get_job(db, job_id)
    assert job.status == "failed" and "HTTP 401" in (job.error or "")
    assert REDACTED in (job.error or "") and job.run_id is not None

    stored = _every_text_in(Path(db_url.removeprefix("sqlite:///")))
    assert "HTTP 401" in stored and KEY not in stored and "Bearer sk-" not in stored
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
    logs += (tmp_path / "worker.out").read_text(errors="replace")
    assert "HTTP 401" in logs and KEY not in logs

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    get_settings.cache_clear()
    try:
        for page, params in (("views/jobs.py", {}), ("views/run.py", {"run": str(job.run_id)})):
            at = open_page(page, **params)
            assert not at.exception
            shown = _page_text(at._tree)
            assert "401" in shown and KEY not in shown, page
    finally:
        get_settings.cache_clear()
