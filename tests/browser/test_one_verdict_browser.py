"""One verdict everywhere, in a real browser (issue 34): Compare opens with the decision line; Explore's
legend names workloads in words under a full-width plot; the HTML reports read as reports. Each view is
kept as a screenshot to look at ($LATENCYLAB_SCREENSHOT_DIR)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHA = "2f1e" * 16
TRACE = {
    "trace": "/srv/traces/conversation_trace.jsonl", "trace_format": "mooncake", "time_scale": 10.0,
    "source_output_lengths": False, "source_sha256": SHA, "trace_duration_s": 20.0, "output_tokens": 16,
    "prompt_tokens": None,
}  # fmt: skip
CONTENTION = {"flag": "contention", "kind": "machine", "detail": "load average up to 3.7 on 2 cores"}


def seed(db) -> dict[str, int]:
    """A baseline, INT8 weight-only (faster, perplexity 0.4 % worse, measured under contention), bfloat16
    (no real difference) and a trace run (another workload: a front of its own)."""
    from seed_runs import make_run, paired_quality

    auto = {"dtype": "auto"}
    return {
        "base": make_run(db, recipe=auto, tpot_ms=10.0, n=30, quality=paired_quality(0.0, 1)),
        "int8": make_run(
            db, recipe={**auto, "quantization": "torchao_int8_weight_only"}, tpot_ms=7.4, n=30, seed=1,
            quality=paired_quality(0.004, 2), extra_metrics={"noise_flags": [CONTENTION]},
        ),
        "bf16": make_run(db, dtype="bfloat16", recipe={}, tpot_ms=9.9, n=30, seed=2, quality=paired_quality(0.0, 3)),
        "trace": make_run(db, recipe=auto, workload=TRACE, tpot_ms=12.0, n=30, seed=3, quality=paired_quality(0.001, 4)),
    }  # fmt: skip


@pytest.fixture(scope="module")
def verdict_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int], str, Path]]:
    from storage import open_database

    folder = tmp_path_factory.mktemp("one_verdict")
    db_url = f"sqlite:///{folder / 'app.db'}"
    ids = seed(open_database(db_url))
    with running_app(folder, db_url, worker=False) as base:
        yield base, ids, db_url, folder


def _wait_for_chart(page) -> None:
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=90_000)


@pytest.fixture
def tall(browser):
    """A page 2,400 px tall: Streamlit scrolls inside its own container, so a full-page shot is the viewport."""
    context = browser.new_context(viewport={"width": 1440, "height": 2400})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def test_compare_opens_with_the_decision_line(verdict_app, tall, shot) -> None:
    base, ids, _, _ = verdict_app
    page = tall
    page.goto(f"{base}/compare?runs={ids['base']},{ids['int8']},{ids['bf16']}&baseline={ids['base']}", timeout=60_000)
    _wait_for_chart(page)
    page.get_by_text("Queue repeats to decide").first.wait_for(timeout=30_000)
    body = page.inner_text("body")
    line = next(t for t in body.splitlines() if "INT8 weight-only (torchao): " in t)
    assert "faster decode (significant, 95 % CI " in line and "perplexity 0." in line and "% worse (significant" in line
    assert line.endswith("measured once under contention: repeat to confirm.")
    assert "Traceback" not in body
    shot(page, "compare")


def test_explore_names_workloads_in_words_under_a_full_size_plot(verdict_app, tall, shot) -> None:
    base, _, _, _ = verdict_app
    page = tall
    page.goto(f"{base}/explore?x=tpot_ms_p50&y=quality.perplexity&color=engine", timeout=60_000)
    _wait_for_chart(page)
    page.get_by_text("Pareto front:").first.wait_for(timeout=30_000)
    legend = page.locator('[data-testid="stPlotlyChart"] .legend').first.text_content() or ""
    assert "conversation_trace.jsonl" in legend and SHA[:4] not in legend and "/srv/" not in legend
    warning = page.locator('[data-testid="stAlert"]').first.inner_text()
    for internal in (SHA[:4], "source sha256", "source output lengths", "trace duration s", "16.0"):
        assert internal not in warning, internal
    plot = page.locator('[data-testid="stPlotlyChart"] .nsewdrag').first.bounding_box()
    chart = page.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
    shot(page, "explore")
    assert plot is not None and chart is not None and plot["width"] > 0.8 * chart["width"], (plot, chart)


def test_the_reports_read_as_reports(verdict_app, page, shot) -> None:
    from engine.report.export import comparison_html, explore_html, load_requests, load_runs
    from engine.report.fronts import with_intervals
    from storage import open_database
    from storage.frames import figure_records, runs_frame

    _, ids, db_url, folder = verdict_app
    db = open_database(db_url)
    chosen = [ids["base"], ids["int8"], ids["bf16"]]
    runs, _ = load_runs(db, chosen)
    compare = folder / "compare.html"
    compare.write_text(comparison_html(runs, load_requests(db, chosen), ids["base"], "http://127.0.0.1:8501/compare"))
    frame = runs_frame(db)
    records = figure_records(db, frame["run_id"].tolist())
    frame = with_intervals(frame, ["tpot_ms_p50", "quality.perplexity"], records)
    explore = folder / "explore.html"
    explore.write_text(explore_html(frame, "tpot_ms_p50", "quality.perplexity", "engine", None, None, records=records))
    for path, name in ((compare, "report-compare"), (explore, "report-explore")):
        page.goto(path.as_uri())
        page.wait_for_selector(".main-svg", timeout=60_000)
        body = page.inner_text("body")
        assert "Decision" in body and "INT8 weight-only (torchao)" in body and "run_id" not in body
        shot(page, name)
