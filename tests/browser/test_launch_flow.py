"""A user launches a small demo job from the Launch page and watches it finish on the Jobs page."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_launch_demo_job_and_see_it_finish(page, live_app, demo_folder):
    from storage import jobs, open_database

    page.goto(f"{live_app.url}/launch")
    page.get_by_text("Launch a benchmark").wait_for()
    # the smallest preset: 16 prompt tokens, 4 output tokens, 2 requests
    page.get_by_test_id("stSelectbox").filter(has_text="Preset").click()
    page.get_by_role("option", name="quick check: 16 in / 4 out").click()
    page.get_by_text("Ready: 1 job on cpu").wait_for()
    page.get_by_role("button", name="Submit", exact=True).click()
    page.get_by_text(re.compile(r"Queued job \d+")).wait_for()

    db = open_database(live_app.db_url)
    [job] = jobs.list_jobs(db)
    assert job.spec["workload"]["output_tokens"] == 4

    page.goto(f"{live_app.url}/jobs")
    page.get_by_text(f"Job {job.id}").first.wait_for()
    # the list refreshes itself (st.fragment(run_every=...)): no reload from here on
    link = page.get_by_role("link", name=re.compile(r"Open run \d+"))
    link.wait_for(timeout=150_000)
    page.get_by_text("done", exact=True).first.wait_for(timeout=30_000)
    finished = jobs.get_job(db, job.id)
    assert finished.status == "done", finished.error
    assert link.get_attribute("href").endswith(f"run?run={finished.run_id}")
