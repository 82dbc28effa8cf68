"""An Optimize permalink (``/optimize?study=NAME``) in a fresh browser: the best feasible recipe in
one sentence, the front chart, the trials table; the screenshot is kept for review."""

from __future__ import annotations

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_optimize_permalink_shows_the_best_recipe_and_the_front(tmp_path, browser, shot) -> None:
    from seed_studies import seed_study

    from storage import open_database

    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    seed_study(open_database(db_url))
    with running_app(tmp_path, db_url, worker=False) as base:
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        try:
            page = context.new_page()
            page.goto(f"{base}/optimize?study=smol", wait_until="domcontentloaded", timeout=60_000)
            page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
            page.get_by_text("faster decode").first.wait_for(timeout=30_000)
            # the page refreshes itself every 2 s: wait for the buttons and the exports, not a snapshot
            page.get_by_role("button", name="Pause").first.wait_for(timeout=30_000)
            page.get_by_text("Front as JSON").first.wait_for(timeout=30_000)
            body = page.inner_text("body")
            assert "bfloat16: 1.2x faster decode (TPOT p50 40.0 ms vs 50.0 ms), perplexity +0.5 %, fits" in body
            assert "Pause" in body and "Front as JSON" in body
            page.wait_for_timeout(1500)
            shot(page, "optimize_study")
        finally:
            context.close()
