"""The Run page in a real browser on a seeded database: distributions with the small-sample
warning, the time series over the run, requested vs actual tokens; a 1440x1000 screenshot is kept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def run_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    from seed_runs import make_run

    from storage import open_database

    folder = tmp_path_factory.mktemp("run_page")
    db_url = f"sqlite:///{folder / 'app.db'}"
    run_id = make_run(open_database(db_url), name="INT8 on 12 requests", n=12, gap_ms=20)
    with running_app(folder, db_url, worker=False) as base:
        yield base, run_id


def test_run_page_time_series_and_warnings(run_app: tuple[str, int], page, shot) -> None:
    base, run_id = run_app
    page.goto(f"{base}/run?run={run_id}", timeout=60_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    page.get_by_text("Over the run").first.wait_for(timeout=30_000)
    page.get_by_text("Requested vs actual tokens").first.wait_for(timeout=30_000)
    body = page.inner_text("body")
    assert "TTFT, 12 requests: p99 is the largest value" in body
    assert "Traceback" not in body
    charts = page.locator('[data-testid="stPlotlyChart"] .main-svg')
    assert charts.count() >= 4
    titles = page.locator(".gtitle, .annotation-text").evaluate_all("els => els.map(e => e.textContent)")
    assert "output tokens/s in 1 s windows" in titles and "requests in flight" in titles
    assert "requested 32" in titles and "requested 8" in titles
    shot(page, "run")
    page.get_by_role("heading", name="Distributions").scroll_into_view_if_needed()
    shot(page, "run_distributions")
    page.locator('[data-testid="stPlotlyChart"]', has_text="requests in flight").scroll_into_view_if_needed()
    shot(page, "run_time_series")
    page.locator('[data-testid="stPlotlyChart"]', has_text="output tokens per request").scroll_into_view_if_needed()
    shot(page, "run_tokens")
