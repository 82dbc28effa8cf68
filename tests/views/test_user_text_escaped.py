"""User text is shown literally on every page (issue 26, item 6): one escaping helper (ui/text.py).

``<script>`` was shown escaped on some pages and raw (though inert) in some warnings and Launch
captions. Every markdown-rendered element (markdown, captions, alerts, subheaders) of each page is
rendered here as CommonMark: user text must never come out as HTML or as emphasis.
"""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from seed_runs import make_run, open_page
from streamlit.testing.v1 import AppTest

HOSTILE = "<script>alert(1)</script>**loud**"
KINDS = ("markdown", "caption", "warning", "info", "error", "success", "subheader")


def rendered(at: AppTest) -> str:
    md = MarkdownIt("commonmark")
    return "\n".join(md.render(str(e.value)) for kind in KINDS for e in at.get(kind))


def assert_literal(at: AppTest) -> None:
    assert not at.exception, at.exception
    html = rendered(at)
    assert "<script>" not in html and "<strong>loud</strong>" not in html, html


@pytest.fixture
def hostile_runs(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    a = make_run(db, name=HOSTILE, sweep=HOSTILE)
    b = make_run(db, name="plain", seed=1, recipe={"drop_layers": 2})
    return a, b


@pytest.mark.parametrize(
    ("page", "params"),
    [
        ("views/run.py", {"run": "{a}"}),
        ("views/run.py", {"run": HOSTILE}),
        ("views/compare.py", {"runs": "{a},{b}", "baseline": HOSTILE}),
        ("views/compare.py", {"runs": "{a},{b}," + HOSTILE}),
        ("views/explore.py", {"since": HOSTILE, "runs": "{a},x" + HOSTILE}),
        ("views/history.py", {"fingerprint": HOSTILE}),
        ("views/history.py", {"suite": HOSTILE, "entry": HOSTILE}),
        ("views/runs.py", {"run": HOSTILE}),
        ("views/whatif.py", {"batch": HOSTILE}),
    ],
)
def test_hostile_text_in_names_and_links_is_shown_literally(hostile_runs, page, params):
    a, b = hostile_runs
    at = open_page(page, **{k: v.format(a=a, b=b) if "{" in v else v for k, v in params.items()})
    assert_literal(at)


def test_the_history_metric_link_is_shown_literally(hostile_runs, db):
    from storage.suites import fingerprints

    fp = fingerprints(db)[0].fingerprint
    assert_literal(open_page("views/history.py", fingerprint=fp, metric=HOSTILE))


def test_jobs_and_launch_show_hostile_text_literally(db, db_url, monkeypatch):
    from engine.spec import parse_job_spec
    from storage import jobs

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    spec = parse_job_spec({"model": {"source": "demo"}, "name": HOSTILE, "workload": {"requests": 2}})
    job = jobs.submit(db, spec, sweep=HOSTILE)
    jobs.claim(db, "w1", ["cpu"])
    jobs.finish(db, job, "w1", "failed", error=HOSTILE)
    assert_literal(open_page("views/jobs.py"))
    assert_literal(open_page("views/launch.py", model=f"./{HOSTILE}"))
