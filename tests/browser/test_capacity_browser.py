"""What-if's serving mode in a real browser: a capacity plan for two recipes on three catalog GPUs, opened from a
link, run with its progress shown, answered with the table and both charts, every figure marked predicted;
1440x1000 screenshots of the answer, the SLO chart and the cost/latency front are kept."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

QUESTION = {
    "mode": "serving",
    "model": "synthetic:llama-3-8b",
    "traffic": '{"prompt_tokens":512}',
    "output": "128",
    "rate": "50",
    "sample": "500",
    "ttft": "500",
    "tpot": "50",
    "variants": "bf16;fp8kv:kv_cache_dtype=fp8",
    "hw": "h100-sxm,a100-80gb,l40s",
}


@pytest.fixture(scope="module")
def capacity_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("capacity")
    with running_app(folder, f"sqlite:///{folder / 'app.db'}", worker=False) as base:
        yield base


def test_a_capacity_plan_for_two_recipes_on_three_gpus(capacity_app: str, page, shot) -> None:
    page.goto(f"{capacity_app}/whatif?{urlencode(QUESTION)}", timeout=60_000)
    run = page.get_by_role("button", name="Run the capacity search")
    run.wait_for(timeout=90_000)
    run.click()
    page.get_by_text("Planned 6 configurations").first.wait_for(timeout=180_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=60_000)
    body = page.inner_text("body")
    assert "Cheapest within TTFT p90 ≤ 500 ms and TPOT p90 ≤ 50 ms" in body
    for label in ("bf16 · h100-sxm · TP1", "fp8kv · a100-80gb · TP1", "fp8kv · l40s · TP1"):
        assert label in body
    assert "(predicted)" in body and "no error band is claimed" in body
    assert "Traceback" not in body and not re.search(r"\bNone\b", body)
    run.evaluate("e => e.scrollIntoView({block: 'start'})")  # the button, its progress, the answer and the table
    path = shot(page, "capacity-answer")
    charts = page.locator('[data-testid="stPlotlyChart"]')
    assert charts.count() == 2
    charts.first.scroll_into_view_if_needed()
    shot(page, "capacity-charts")
    charts.nth(1).evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, "capacity-front")
    assert isinstance(path, Path) and path.stat().st_size > 10_000
