"""The Runs table at 1440 px: every column fits without horizontal scrolling, and ticking two rows
gives a Compare link that opens Compare with them. Screenshots of Runs and Explore are kept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    from seed_runs import make_run, real_quality, seed_basic

    from storage import open_database

    folder = tmp_path_factory.mktemp("runs_table")
    db_url = f"sqlite:///{folder / 'app.db'}"
    db = open_database(db_url)
    ids = seed_basic(db)
    flag = {"flag": "contention", "kind": "machine", "detail": "load 3.4 on 2 cores"}
    ids["batch"] = make_run(
        db,
        name="batch 8",
        batch_size=8,
        dtype="bfloat16",
        seed=5,
        extra_metrics={"noise_flags": [flag]},
        quality=real_quality(perplexity=19.1, kl_mean=0.02),
    )
    ids["flaky"] = make_run(db, name="flaky", failed_requests=2, seed=6)
    with running_app(folder, db_url, worker=False) as base:
        yield base, ids


def _grid(page):
    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=90_000)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)  # the canvas grid lays out its columns after it appears
    return grid


def test_runs_table_fits_and_selected_rows_open_compare(runs_app, page, shot) -> None:
    base, ids = runs_app
    page.goto(f"{base}/", wait_until="domcontentloaded", timeout=60_000)
    grid = _grid(page)
    box = grid.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1440
    widths = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller')]
                 .map(e => [e.scrollWidth, e.clientWidth])"""
    )
    assert widths and all(scroll <= client + 1 for scroll, client in widths), widths  # no horizontal scroll
    scroller = page.locator('[data-testid="stDataFrame"] .dvn-scroller').first.bounding_box()
    assert scroller is not None and scroller["x"] + scroller["width"] <= 1440  # the grid's last pixel is on screen
    shot(page, "runs")
    body = page.inner_text("body")
    assert "Traceback" not in body and "of 6 runs" in body
    # tick the first two rows (the selection column sits at the grid's left edge; rows are 35 px)
    for row in (0, 1):
        page.mouse.click(box["x"] + 18, box["y"] + 35 * (row + 1) + 17)
        page.wait_for_timeout(800)
    link = page.get_by_text("Compare the 2 selected runs")
    link.wait_for(timeout=30_000)
    link.click()
    page.wait_for_url("**/compare?runs=*", timeout=30_000)
    chosen = {int(i) for i in page.url.split("runs=", 1)[1].split("&")[0].replace("%2C", ",").split(",")}
    assert len(chosen) == 2 and chosen <= set(ids.values())
    page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=90_000)
    assert "Traceback" not in page.inner_text("body")


def test_explore_screenshot(runs_app, page, shot) -> None:
    base, _ids = runs_app
    page.goto(f"{base}/explore", wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    page.wait_for_timeout(1500)
    shot(page, "explore")
    body = page.inner_text("body")
    assert "Traceback" not in body and "Pareto front:" in body
