"""Fixtures of the CLI tests: the fake OpenAI-compatible server of the backend tests, on a free port."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

FAKE_SERVER = Path(__file__).resolve().parents[1] / "backends" / "test_openai_backend.py"


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[str]:
    """Base URL of the fake server (its handler is the backend tests' own: models ok, double, missing ...)."""
    spec = importlib.util.spec_from_file_location("fake_openai_server", FAKE_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = ThreadingHTTPServer(("127.0.0.1", 0), module._Handler)
    server.daemon_threads = True
    server.bodies = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
