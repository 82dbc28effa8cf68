"""The backend tests' fake OpenAI server made to serve one request at a time, so its latency grows with
load: requests queue behind one lock, each holding it for ``service_s`` besides its chunks (about
25 requests/s at most with 3 output tokens and the default 30 ms). Used by the saturation tests."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

FAKE_SERVER = Path(__file__).resolve().parent / "engine" / "backends" / "test_openai_backend.py"


@contextmanager
def one_at_a_time(service_s: float = 0.03) -> Iterator[str]:
    """The base URL of a queueing fake server on 127.0.0.1 (models ``ok``, ``double`` ...), shut down after."""
    spec = importlib.util.spec_from_file_location("fake_openai_server_queueing", FAKE_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gate = threading.Lock()

    class Queueing(module._Handler):
        def do_POST(self) -> None:
            with gate:
                time.sleep(service_s)
                super().do_POST()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Queueing)
    server.daemon_threads = True
    server.bodies = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
