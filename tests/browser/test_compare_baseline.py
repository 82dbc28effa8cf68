"""Runs -> Compare in a real browser (issue 26, item 1): two demo-like runs (the engine's defaults and
INT8 weight-only) ticked in the Runs table open Compare with the defaults run as the baseline.

Before, the Runs table listed (and ticked) the newest first, Compare took the first ticked run as its
baseline, and the summary read "quantization none: ... weights +144 %": the base recipe described
against the optimisation, under "Against run 1 (run 1):", with both selectors showing the same label.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def two_runs_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    from seed_runs import make_run, real_quality

    from storage import open_database

    folder = tmp_path_factory.mktemp("compare_baseline")
    db_url = f"sqlite:///{folder / 'app.db'}"
    db = open_database(db_url)
    ids = {
        "base": make_run(
            db, dtype="auto", tpot_ms=20, weights_memory=513 * 2**20, quality=real_quality(perplexity=20.35)
        ),
        "int8": make_run(
            db,
            dtype="auto",
            recipe={"quantization": "torchao_int8_weight_only"},
            tpot_ms=38,
            seed=1,
            weights_memory=210 * 2**20,
            quality=real_quality(perplexity=20.41),
        ),
    }
    with running_app(folder, db_url, worker=False) as base:
        yield base, ids


def test_ticking_both_runs_compares_int8_against_the_engine_defaults(two_runs_app, page, shot) -> None:
    base, ids = two_runs_app
    page.goto(f"{base}/", wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=90_000)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)  # the canvas grid lays out its columns after it appears
    box = grid.bounding_box()
    assert box is not None
    for row in (0, 1):  # newest first: the INT8 run is ticked first
        page.mouse.click(box["x"] + 18, box["y"] + 35 * (row + 1) + 17)
        page.wait_for_timeout(800)
    link = page.get_by_text("Compare the 2 selected runs")
    link.wait_for(timeout=30_000)
    link.click()
    page.wait_for_url("**/compare?runs=*", timeout=30_000)
    page.get_by_text("Against the baseline").first.wait_for(timeout=90_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    page.wait_for_timeout(1500)
    shot(page, "compare-default-baseline")
    body = page.inner_text("body")
    assert "Traceback" not in body
    assert f"baseline={ids['base']}" in page.url
    assert f"Against the baseline, run {ids['base']} · engine defaults:" in body
    assert f"run {ids['int8']} · INT8 weight-only (torchao): " in body and "weights -59 %" in body
    assert "quantization none:" not in body and "Against run" not in body
    assert "its recipe is the engine's defaults" in body
