"""Starting the app (and a worker) for real-browser tests; shared by the fixtures here."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveApp:
    url: str
    db_url: str
    data_dir: Path


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def running_app(folder: Path, db_url: str, *, worker: bool, env: dict[str, str] | None = None) -> Iterator[str]:
    """``streamlit run app.py`` on a free port (and a CPU worker if asked) on ``db_url``;
    yields the base URL once /_stcore/health answers, stops everything afterwards."""
    port = free_port()
    full_env = dict(
        os.environ,
        LATENCYLAB_DB_URL=db_url,
        LATENCYLAB_DATA_DIR=str(folder),
        PYTHONPATH=str(REPO),
        LATENCYLAB_PUBLIC_BASE_URL=f"http://127.0.0.1:{port}",
        **(env or {}),
    )
    full_env.pop("LATENCYLAB_VIEWER_MODE", None)
    from storage import open_database

    open_database(db_url)  # create the schema once, before two processes race for it
    logs = folder / "procs.log"
    procs = []
    with logs.open("wb") as log:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "streamlit",
                    "run",
                    str(REPO / "app.py"),
                    "--server.port",
                    str(port),
                    "--server.address",
                    "127.0.0.1",
                    "--server.headless",
                    "true",
                    "--browser.gatherUsageStats",
                    "false",
                ],
                cwd=REPO,
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        if worker:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "engine", "worker", "--devices", "cpu"],
                    cwd=REPO,
                    env=full_env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError(f"the app did not start: {logs.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        for proc in reversed(procs):
            _stop(proc)
