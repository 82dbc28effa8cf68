"""The Run page's server-metrics and profile sections in a real browser: the chart draws, the trace
downloads as gzip JSON. The app runs on a seeded temporary database; screenshots go to ``shot``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOP = [
    {"name": "aten::mm", "self_ms": 3277.5, "calls": 4220, "share_pct": 76.4},
    {"name": "aten::_scaled_dot_product_flash_attention_for_cpu", "self_ms": 405.2, "calls": 600, "share_pct": 9.4},
    {"name": "(outside operators)", "self_ms": 253.3, "calls": 0, "share_pct": 5.9},
]


def test_server_metrics_and_profile_on_the_run_page(tmp_path: Path, browser, shot) -> None:
    from series_seed import seed_run, server_series

    from storage import open_database

    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    trace = tmp_path / "profiles" / "abc-20261201T000000000.json.gz"
    trace.parent.mkdir()
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": [{"name": "aten::mm", "ph": "X"}]}).encode()))
    profile = {"steps": 20, "batch_size": 1, "activities": ["cpu"], "top": TOP, "trace_file": str(trace)}
    run_id = seed_run(
        open_database(db_url),
        {"server_metrics": server_series(12), "profile": {**profile, "step_ms_profiled": 214.5, "available": True}},
    )
    with running_app(tmp_path, db_url, worker=False) as base:
        context = browser.new_context(viewport={"width": 1440, "height": 1000}, accept_downloads=True)
        try:
            page = context.new_page()
            page.goto(f"{base}/run?run={run_id}", wait_until="domcontentloaded", timeout=60_000)
            page.locator("#server-metrics").wait_for(timeout=90_000)
            page.get_by_role("button", name="Download the trace").wait_for(timeout=30_000)
            page.wait_for_function(
                "document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg').length >= 3", timeout=90_000
            )
            body = page.inner_text("body")
            assert "peak 2 running, 8 waiting" in body and "Traceback" not in body
            page.locator("#server-metrics").scroll_into_view_if_needed()
            shot(page, "run_server_metrics")
            page.locator("#profile").scroll_into_view_if_needed()
            shot(page, "run_profile")
            with page.expect_download() as got:
                page.get_by_role("button", name="Download the trace").click()
            saved = Path(got.value.path())
            assert json.loads(gzip.decompress(saved.read_bytes()))["traceEvents"][0]["name"] == "aten::mm"
        finally:
            context.close()
