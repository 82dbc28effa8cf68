"""Every page in a real browser at 1440x1000 over one seeded database: it renders its title, shows no
exception, and a screenshot of it is kept (``$LATENCYLAB_SCREENSHOT_DIR`` or a temporary folder) for
a person to look at before a change to the pages is called done."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def seeded_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    from seed_runs import seed_basic
    from seed_studies import seed_study

    from storage import open_database
    from tests.views.test_loadcurve_page import seed_sweep

    folder = tmp_path_factory.mktemp("every_page")
    db_url = f"sqlite:///{folder / 'app.db'}"
    db = open_database(db_url)
    ids = seed_basic(db)
    seed_sweep(db, "nightly-rates")
    seed_study(db)
    with running_app(folder, db_url, worker=False) as base:
        yield base, ids


# (screenshot name, address, a text the page shows when it rendered)
PAGES = [
    ("runs", "", "Runs"),
    ("run", "run?run={base}", "Recipe:"),
    ("explore", "explore", "Explore"),
    ("compare", "compare?runs={base},{fast}&baseline={base}", "Side by side"),
    ("history", "history", "History"),
    ("launch", "launch", "Launch a benchmark"),
    ("jobs", "jobs", "Jobs"),
    ("whatif", "whatif", "What-if"),
    ("optimize", "optimize", "SLA finder"),
    ("optimize_study", "optimize?study=smol", "faster decode"),
    ("load_curves", "loadcurve?sweep=nightly-rates", "knee at"),
]


@pytest.mark.parametrize(("name", "address", "marker"), PAGES, ids=[p[0] for p in PAGES])
def test_every_page_renders_and_is_kept_as_a_screenshot(seeded_app, page, shot, name, address, marker) -> None:
    base, ids = seeded_app
    page.goto(f"{base}/{address.format(**ids)}", wait_until="domcontentloaded", timeout=60_000)
    page.get_by_text(marker).first.wait_for(timeout=90_000)
    page.wait_for_timeout(2000)  # charts and tables settle after the first text appears
    body = page.inner_text("body")
    assert "Traceback" not in body
    assert page.locator('[data-testid="stException"]').count() == 0
    path = shot(page, f"page-{name}")
    assert path.stat().st_size > 10_000
