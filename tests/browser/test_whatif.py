"""What-if in a real browser: a 70B model on GPUs it does not fit says so, with what would fit,
and draws no TTFT/TPOT bar for those entries; a 1440x1000 screenshot is kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def whatif_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("whatif")
    with running_app(folder, f"sqlite:///{folder / 'app.db'}", worker=False) as base:
        yield base


def test_an_entry_that_does_not_fit_shows_why_and_no_timings(whatif_app: str, page, shot) -> None:
    page.goto(f"{whatif_app}/whatif?model=synthetic:llama-3-70b&dtype=bf16&hw=a100-80gb,l4,mi300x", timeout=60_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    page.get_by_text("does not fit: needs 142 GB, 76 GB usable").first.wait_for(timeout=30_000)
    body = page.inner_text("body")
    assert (
        "a100-80gb (NVIDIA A100 SXM 80GB): does not fit: needs 142 GB, 76 GB usable — try tensor parallel 2 or int8"
        in body
    )
    assert "l4 (NVIDIA L4 24GB): does not fit: needs 142 GB, 23 GB usable — try tensor parallel 8" in body
    assert "Traceback" not in body and "None" not in body
    # the TTFT subplot's bars: one drawn (mi300x), none for the two that do not fit, each labelled instead
    ttft_bars = page.locator('[data-testid="stPlotlyChart"] .barlayer .trace').first.locator(".point path")
    heights = [b["height"] for b in (ttft_bars.nth(i).bounding_box() for i in range(ttft_bars.count())) if b]
    assert sum(1 for h in heights if h > 0.5) == 1
    assert page.locator('[data-testid="stPlotlyChart"] .textpoint text', has_text="does not fit").count() == 4
    path = shot(page, "whatif")
    page.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
    shot(page, "whatif_chart")
    assert isinstance(path, Path) and path.stat().st_size > 10_000
