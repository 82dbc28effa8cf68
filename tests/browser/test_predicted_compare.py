"""A predicted run beside its measured twin in a real browser: an Azure-format trace window measured, and the
same spec predicted (stored as the simulator stores one). Compare names the prediction, checks it figure by
figure against the twin (the twin's figure, the prediction, the error, within the band or not) and gives no
significance verdict; the Run page says "Predicted, not measured"; Runs badges it only when asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def twins_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int]]:
    from seed_runs import AZURE_TRACE, make_predicted_run, make_run

    from storage import open_database

    folder = tmp_path_factory.mktemp("predicted_compare")
    db_url = f"sqlite:///{folder / 'app.db'}"
    db = open_database(db_url)
    twin = {"name": "azure window", "workload": AZURE_TRACE, "n": 60}
    measured = make_run(db, ttft_ms=410, tpot_ms=99, **twin)
    predicted = make_predicted_run(db, ttft_ms=425, tpot_ms=95, seed=4, **twin)
    with running_app(folder, db_url, worker=False) as base:
        yield base, measured, predicted


def _open(page, url: str) -> str:
    page.set_viewport_size({"width": 1440, "height": 2600})  # the whole comparison in one screenshot
    page.goto(url, wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)
    page.wait_for_timeout(1500)
    return page.inner_text("body")


def test_compare_reads_a_prediction_against_its_measured_twin(twins_app, page, shot) -> None:
    base, measured, predicted = twins_app
    body = _open(page, f"{base}/compare?runs={predicted},{measured}")
    shot(page, "compare-predicted-vs-measured-twin")
    assert "Traceback" not in body and f"baseline={measured}" in page.url
    assert "Prediction against measurement" in body
    assert f"run {predicted} (predicted) against run {measured}, its measured twin (the same spec)" in body
    assert "predicted on test CPU (local, measured)" in body
    assert "decode: predicted vs measured" in body and "band ±10 %" in body
    assert "run 2 is predicted, not measured: measure it before deciding" in body
    assert "(significant, 95 % CI" not in body  # no significance verdict on a prediction
    assert "it is measured (a prediction is checked against a measurement)" in body


def test_the_run_page_and_the_runs_list_say_predicted(twins_app, page, shot) -> None:
    base, _, predicted = twins_app
    body = _open(page, f"{base}/run?run={predicted}&predicted=1")
    shot(page, "run-predicted")
    assert "Predicted run" in body and "Predicted, not measured" in body and "not predicted" in body
    page.goto(f"{base}/?predicted=all", wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=90_000)
    page.wait_for_timeout(2000)
    shot(page, "runs-predicted-all")
    assert "measured and predicted runs" in page.inner_text("body")
