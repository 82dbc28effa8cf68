"""A sweep's load curve in a real browser: seeded sweep runs -> Load curves page -> the charts
(TTFT and TPOT against offered load, SLO line, knee) are drawn; a 1440x1000 screenshot is kept."""

from __future__ import annotations

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_sweeps_load_curve_is_drawn(tmp_path, page, shot) -> None:
    from storage import open_database
    from tests.views.test_loadcurve_page import seed_sweep

    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    seed_sweep(open_database(db_url), "nightly-rates")
    with running_app(tmp_path, db_url, worker=False) as base:
        page.goto(f"{base}/loadcurve?sweep=nightly-rates", wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
        page.get_by_text("knee at 2").first.wait_for(timeout=30_000)
        page.wait_for_timeout(1500)  # let the second chart and the table settle before the screenshot
        body = page.inner_text("body")
        assert "TTFT against offered load (req/s)" in body and "TPOT against offered load (req/s)" in body
        assert "SLO 150 ms" in body and "Traceback" not in body
        assert page.locator('[data-testid="stPlotlyChart"] .main-svg').count() >= 2
        path = shot(page, "load_curve")
        assert path.stat().st_size > 10_000
        page.goto(f"{base}/loadcurve", wait_until="domcontentloaded", timeout=60_000)
        page.get_by_text("nightly-rates").first.wait_for(timeout=30_000)
        shot(page, "load_curve_list")
