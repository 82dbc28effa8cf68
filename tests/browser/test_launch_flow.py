"""A user launches a small demo job from the Launch page and watches it finish on the Jobs page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_launch_demo_job_and_see_it_finish(page, live_app, demo_folder):
    from storage import jobs, open_database

    page.goto(f"{live_app.url}/launch")
    page.get_by_text("Launch a benchmark").wait_for()
    # the smallest preset: 16 prompt tokens, 4 output tokens, 6 requests
    page.get_by_test_id("stSelectbox").filter(has_text="Workload preset").click()
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
    link.wait_for(timeout=150_000)  # the run is linked when it is stored, a moment before the job ends
    page.get_by_text("done", exact=True).first.wait_for(timeout=120_000)
    finished = jobs.get_job(db, job.id)
    assert finished.status == "done", (finished.status, finished.error)
    assert link.get_attribute("href").endswith(f"run?run={finished.run_id}")


def _quick_check(page) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text="Workload preset").click()
    page.get_by_role("option", name="quick check: 16 in / 4 out").click()
    page.get_by_text("Ready: 1 job on cpu").wait_for()


def test_preset_then_submit_then_job_then_run(page, live_app, demo_folder, shot):
    from storage import jobs, open_database

    page.goto(f"{live_app.url}/launch")
    page.get_by_text("Launch a benchmark").wait_for()
    page.get_by_text("Estimate:").first.wait_for()
    shot(page, "launch-default")
    # presets offered on the CPU are buttons; float16 is greyed, with the reason listed
    assert page.get_by_role("button", name="float16", exact=True).is_disabled()
    page.get_by_text("float16 is not supported on the CPU").first.wait_for()
    assert page.get_by_text("GPTQ bits per weight").count() == 0  # quantization none: its fields are hidden
    _quick_check(page)
    page.get_by_role("button", name="bfloat16", exact=True).click()
    page.get_by_text("Preset bfloat16").wait_for()
    page.get_by_text(
        re.compile(r"Ready: 1 job on cpu: synthetic 16-token prompts → 4 output tokens × 6 requests.*bfloat16")
    ).wait_for()
    shot(page, "launch-preset-picked")
    page.get_by_role("button", name="Submit", exact=True).click()
    page.get_by_text(re.compile(r"Queued job \d+")).wait_for()

    db = open_database(live_app.db_url)
    [job] = jobs.list_jobs(db)
    assert job.spec["recipe"]["dtype"] == "bfloat16" and job.spec["workload"]["traffic"]["prompt_tokens"] == 16

    page.goto(f"{live_app.url}/jobs")
    page.get_by_text(f"Job {job.id}").first.wait_for()
    page.get_by_text("transformers · dtype bfloat16").first.wait_for()  # the card names only what differs
    link = page.get_by_role("link", name=re.compile(r"Open run \d+"))
    link.wait_for(timeout=150_000)  # the run is linked when it is stored, a moment before the job ends
    page.get_by_text("done", exact=True).first.wait_for(timeout=120_000)
    finished = jobs.get_job(db, job.id)
    assert finished.status == "done", (finished.status, finished.error)
    assert link.get_attribute("href").endswith(f"run?run={finished.run_id}")
    shot(page, "jobs-after-preset-run")


def test_ten_million_prompt_tokens_queue_nothing(page, live_app, shot):
    from storage import jobs, open_database

    page.goto(f"{live_app.url}/launch")
    page.get_by_text("Launch a benchmark").wait_for()
    _quick_check(page)
    page.get_by_label("Name (optional)").fill("ten million")
    page.get_by_text("Ready: 1 job on cpu: synthetic 16-token prompts").wait_for()
    field = page.get_by_label("Prompt tokens", exact=True)
    expect(field).to_have_count(1)  # the previous preset's input is gone once the rerun ends
    field.fill("10000000")
    # Submit right after typing (the click that used to queue the old 16-token value)
    page.get_by_role("button", name="Submit", exact=True).click()
    page.get_by_text("Prompt tokens: at most 1,000,000 (10,000,000 given)").first.wait_for()
    page.get_by_text("Cannot launch").first.wait_for()
    expect(page.get_by_role("button", name="Submit", exact=True)).to_be_disabled()
    assert field.input_value() == "10000000"  # the value shown is the value the page checked
    shot(page, "launch-invalid-10M")
    page.wait_for_timeout(1500)  # a job queued by the click would be in the database by now
    queued = jobs.list_jobs(open_database(live_app.db_url))
    assert all(j.spec["workload"]["traffic"]["prompt_tokens"] == 10_000_000 for j in queued), [
        j.spec["workload"] for j in queued
    ]
    assert queued == []
