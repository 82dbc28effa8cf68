"""Issue 34 in a real browser: the Run page of a trace run whose schedule was not kept leads with latency from the
due time, and the What-if page says why its eager-transformers figures look the same on every GPU."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def issue_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    from schedule_seed import make_serial_trace_run

    from storage import open_database

    folder = tmp_path_factory.mktemp("issue34")
    db_url = f"sqlite:///{folder / 'app.db'}"
    run_id = make_serial_trace_run(open_database(db_url))
    with running_app(folder, db_url, worker=False) as base:
        yield base, run_id


def test_a_trace_run_that_fell_behind(issue_app: tuple[str, int], page, shot) -> None:
    base, run_id = issue_app
    page.goto(f"{base}/run?run={run_id}", timeout=60_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    page.get_by_text("Schedule adherence").first.wait_for(timeout=30_000)
    body = page.inner_text("body")
    assert "TTFT p50 from the due time" in body and "from the send: 1.36 s" in body
    assert "The schedule was not kept" in body and "Traceback" not in body
    shot(page, "run_trace_schedule_not_kept")
    client = page.locator('[data-testid="stExpander"] summary', has_text="Client").first
    client.scroll_into_view_if_needed()
    client.click()  # the client's own lag beside the schedule's lateness
    page.get_by_text("send minus due (the schedule)").first.wait_for(timeout=30_000)
    page.wait_for_timeout(800)  # the expander's opening animation
    shot(page, "run_trace_client")
    page.get_by_text("Schedule adherence").first.scroll_into_view_if_needed()
    shot(page, "run_trace_traffic")


def test_what_if_says_why(issue_app: tuple[str, int], page, shot) -> None:
    base, _ = issue_app
    page.goto(f"{base}/whatif?model=demo&engine=transformers&hw=h100-sxm,a100-80gb,l40s,rtx-4090", timeout=60_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    body = page.inner_text("body")
    assert "Why these figures" in body and "host overhead per step" in body and "priors_h200.json" in body
    assert "For comparison" in body and "Traceback" not in body
    shot(page, "whatif_why")
    page.get_by_text("For comparison").first.scroll_into_view_if_needed()
    shot(page, "whatif_comparison")
