"""Issue 33 in a real browser with sign-in on (a local OIDC provider): Launch names the folders jobs may read, a
trace outside them (/etc/passwd) is refused in one line that quotes none of it, a file inside them that is no
trace is refused without its lines, and a path holding ':x:' shows as typed (no emoji)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect
from test_sign_in import OPERATOR, _sign_in, signed_app  # noqa: F401 - the module's app, signed in with OIDC

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = Path(__file__).resolve().parents[2] / "data" / "screens-inputs"
PASSWD = "zorro:x:0:0:zorro:/zorro:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n"


def _trace(page, value: str) -> None:
    field = page.get_by_label("Trace file (its own schedule)", exact=True)
    field.fill(value)
    field.press("Enter")


def _main_text(page) -> str:
    return page.inner_text('[data-testid="stMain"]')


def _shot(page, target, path: Path) -> None:
    """The page scrolled to ``target`` (the app scrolls inside its main area, so a full-page shot is the viewport)."""
    target.scroll_into_view_if_needed()
    page.screenshot(path=str(path))


def test_a_trace_outside_the_allowed_folders_is_refused_without_quoting_it(signed_app, browser) -> None:  # noqa: F811
    from storage import jobs, open_database

    url, db_url = signed_app
    data = Path(db_url.removeprefix("sqlite:///")).parent  # the app's LATENCYLAB_DATA_DIR
    shots = Path(os.environ.get("LATENCYLAB_SCREENSHOT_DIR") or SHOTS)
    shots.mkdir(parents=True, exist_ok=True)
    context, page = _sign_in(browser, url, OPERATOR)
    try:
        caption = page.get_by_text(f"Jobs read files only from {data / 'traces'}")
        caption.wait_for()
        _shot(page, caption, shots / "launch-allowed-folders.png")
        page.get_by_text("trace replay", exact=True).click()
        page.get_by_test_id("stSelectbox").filter(has_text="Trace format").click()
        page.get_by_role("option", name="azure").click()
        _trace(page, "/etc/passwd")
        refusal = page.get_by_text("Cannot launch: trace /etc/passwd is outside the folders this app reads with sign")
        refusal.wait_for()
        expect(page.get_by_role("button", name="Submit", exact=True)).to_be_disabled()
        text = _main_text(page)
        assert "root:" not in text and "/bin/bash" not in text and "\u274c" not in text, text[-2000:]
        assert f"{data / 'traces'}, {data / 'datasets'}, {data / 'models'}, {data / 'prompts'}" in text
        _shot(page, refusal, shots / "trace-outside-refused.png")

        (data / "traces").mkdir(exist_ok=True)
        (data / "traces" / "passwd.csv").write_text(PASSWD)
        _trace(page, str(data / "traces" / "passwd.csv"))
        no_column = page.get_by_text("no such column (the header, 1 field, does not name it")
        no_column.wait_for()
        text = _main_text(page)
        assert "zorro" not in text and "alice" not in text and "\u274c" not in text, text[-2000:]
        _shot(page, no_column, shots / "trace-inside-not-echoed.png")

        _trace(page, "/srv/a:x:b.csv")  # a path with an emoji shortcode: shown as typed
        literal = page.get_by_text("is outside the folders this app reads with sign-in on").first
        literal.wait_for()
        text = _main_text(page)
        assert "/srv/a:\u2060x:b.csv" in text and "\u274c" not in text, text[-2000:]
        _shot(page, literal, shots / "shortcode-literal.png")
    finally:
        context.close()
    assert jobs.list_jobs(open_database(db_url)) == []
