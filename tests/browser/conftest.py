"""Real-browser fixtures: Debian's chromium driven by Playwright, and a live app + worker.

Chromium comes from apt (installed here when /usr/bin/chromium is missing; CI runs as
root); Playwright's own browser downloads are never used. The app and a worker run as
subprocesses on a free port with a temporary database.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def _apt_install() -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        subprocess.run(cmd, env=env, capture_output=True, check=True)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not Path(CHROMIUM).exists():
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.skip("chromium is not installed and cannot be installed here (needs root and apt-get)")
        _apt_install()
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_path: str):
    # Module scope: Playwright's sync API keeps an asyncio loop running in this thread
    # while it is open, which would break later tests that call asyncio.run().
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


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


@pytest.fixture
def live_app(tmp_path: Path):
    """Streamlit on a free port plus a CPU worker, sharing a temporary SQLite database."""
    port = free_port()
    db_url = f"sqlite:///{tmp_path / 'browser.db'}"
    env = dict(os.environ, LATENCYLAB_DB_URL=db_url, LATENCYLAB_DATA_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    env.pop("LATENCYLAB_VIEWER_MODE", None)
    from storage import open_database

    open_database(db_url)  # create the schema once, before two processes race for it
    logs = tmp_path / "procs.log"
    with logs.open("wb") as log:
        app = subprocess.Popen(
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
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        worker = subprocess.Popen(
            [sys.executable, "-m", "engine", "worker", "--devices", "cpu"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or app.poll() is not None:
                raise RuntimeError(f"the app did not start: {logs.read_text()[-2000:]}")
            time.sleep(0.3)
        yield LiveApp(url=url, db_url=db_url, data_dir=tmp_path)
    finally:
        _stop(worker)
        _stop(app)
