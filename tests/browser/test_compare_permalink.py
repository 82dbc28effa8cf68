"""A Compare permalink opened in a fresh browser context shows the chart and the PM summary;
a click on an Explore point opens its run. The app runs on a seeded temporary database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def permalink_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """(base URL, seeded run ids) of a running app on a seeded temporary database."""
    from seed_runs import seed_basic

    from storage import open_database

    folder = tmp_path_factory.mktemp("compare_permalink")
    db_url = f"sqlite:///{folder / 'app.db'}"
    ids = seed_basic(open_database(db_url))
    with running_app(folder, db_url, worker=False) as base:
        yield base, ids


def test_compare_permalink_in_a_fresh_context(permalink_app: tuple[str, dict[str, int]], browser) -> None:
    base, ids = permalink_app
    url = f"{base}/compare?runs={ids['base']},{ids['fast']},{ids['synth']}&baseline={ids['base']}"
    context = browser.new_context()  # fresh: no cookies, no session
    try:
        page = context.new_page()
        page.goto(url, wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
        page.get_by_text("faster decode").first.wait_for(timeout=30_000)
        body = page.inner_text("body")
        assert (
            "INT4 · bfloat16:" in body
            and "perplexity: not enough data (95 % CI from 24 % better to 25 % worse)" in body
        )
        assert "Decision" in body and "faster decode (significant, 95 % CI " in body
        assert "no accuracy (synthetic weights)" in body
        assert f"/compare?runs={ids['base']}%2C{ids['fast']}%2C{ids['synth']}&baseline={ids['base']}" in body
        assert "Traceback" not in body
        # the view's state is in the address bar, so the same link reproduces it
        assert page.url.startswith(f"{base}/compare?") and f"baseline={ids['base']}" in page.url
    finally:
        context.close()


def test_clicking_an_explore_point_opens_its_run(permalink_app: tuple[str, dict[str, int]], browser) -> None:
    base, ids = permalink_app
    context = browser.new_context(viewport={"width": 1400, "height": 1200})
    try:
        page = context.new_page()
        page.goto(f"{base}/explore?x=tpot_ms_p50&y=quality.perplexity&color=engine", timeout=60_000)
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
        # decode 2.6x faster (significant), perplexity +0.4 % not significantly worse: the fast run dominates
        page.get_by_text("Pareto front: 1 run").wait_for(timeout=30_000)
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
        context.close()
