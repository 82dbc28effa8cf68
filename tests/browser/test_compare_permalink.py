"""A Compare permalink opened in a fresh browser context shows the chart and the PM summary.

Self-contained fixtures: a seeded temporary SQLite, the app started with ``streamlit run``
on a free port, and Debian's chromium (apt-installed when missing) driven by Playwright.
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
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

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


def _ensure_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    if shutil.which("apt-get") is None:
        pytest.skip("chromium is missing and apt-get is not available")
    done = subprocess.run(["apt-get", "install", "-y", "chromium", "chromium-driver"], capture_output=True, timeout=600)
    if done.returncode != 0 or not Path(CHROMIUM).exists():
        pytest.skip(f"could not install chromium: {done.stderr.decode(errors='replace')[-300:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def permalink_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """(base URL, seeded run ids) of a running app on a seeded temporary database."""
    from seed_runs import seed_basic

    from storage import open_database

    folder = tmp_path_factory.mktemp("compare_permalink")
    db_url = f"sqlite:///{folder / 'app.db'}"
    ids = seed_basic(open_database(db_url))
    port = _free_port()
    env = {
        **os.environ,
        "LATENCYLAB_DB_URL": db_url,
        "LATENCYLAB_DATA_DIR": str(folder),
        "LATENCYLAB_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
    }
    log = open(folder / "streamlit.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("the app did not start: " + (folder / "streamlit.log").read_text()[-2000:])
            time.sleep(0.5)
        yield base, ids
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_compare_permalink_in_a_fresh_context(permalink_app: tuple[str, dict[str, int]]) -> None:
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    base, ids = permalink_app
    url = f"{base}/compare?runs={ids['base']},{ids['fast']},{ids['synth']}&baseline={ids['base']}"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()  # fresh: no cookies, no session
            page = context.new_page()
            page.goto(url, wait_until="domcontentloaded", timeout=60_000)
            page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
            page.get_by_text("faster decode (TPOT p50)").first.wait_for(timeout=30_000)
            body = page.inner_text("body")
            assert "INT4:" in body and "perplexity +0.4 %" in body
            assert "no accuracy (synthetic weights)" in body
            assert f"/compare?runs={ids['base']}%2C{ids['fast']}%2C{ids['synth']}&baseline={ids['base']}" in body
            assert "Traceback" not in body
            # the view's state is in the address bar, so the same link reproduces it
            assert page.url.startswith(f"{base}/compare?") and f"baseline={ids['base']}" in page.url
        finally:
            browser.close()


def test_clicking_an_explore_point_opens_its_run(permalink_app: tuple[str, dict[str, int]]) -> None:
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    base, ids = permalink_app
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1200}).new_page()
            page.goto(f"{base}/explore?x=tpot_ms_p50&y=quality.perplexity&color=engine", timeout=60_000)
            page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
            page.get_by_text("Pareto front: 2 runs").wait_for(timeout=30_000)
            point = page.locator('[data-testid="stPlotlyChart"] .scatterlayer .trace .points path').first
            box = point.bounding_box()
            assert box is not None
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            page.mouse.move(x, y)
            page.mouse.click(x, y)
            page.wait_for_url("**/run?run=*", timeout=30_000)
            page.get_by_text("Per-request timeline").first.wait_for(state="attached", timeout=30_000)
            assert int(page.url.rsplit("=", 1)[1]) in {ids["base"], ids["fast"]}
        finally:
            browser.close()
