"""Real-browser fixtures: Debian's chromium driven by Playwright, and a live app + worker.

Chromium comes from apt (installed here when /usr/bin/chromium is missing; CI runs as
root); Playwright's own browser downloads are never used. The app and a worker run as
subprocesses on a free port with a temporary database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from browser_app import LiveApp, running_app

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
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


@pytest.fixture
def live_app(tmp_path: Path):
    """Streamlit on a free port plus a CPU worker, sharing a temporary SQLite database."""
    db_url = f"sqlite:///{tmp_path / 'browser.db'}"
    with running_app(tmp_path, db_url, worker=True) as url:
        yield LiveApp(url=url, db_url=db_url, data_dir=tmp_path)


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where page screenshots (1440x1000) are kept: $LATENCYLAB_SCREENSHOT_DIR, else a session temp folder."""
    chosen = os.environ.get("LATENCYLAB_SCREENSHOT_DIR")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def shot(screenshot_dir: Path):
    """``shot(page, "name")`` saves a full-page screenshot as NAME.png and returns its path."""

    def take(pg, name: str) -> Path:
        path = screenshot_dir / f"{name}.png"
        pg.screenshot(path=str(path), full_page=True)
        return path

    return take
