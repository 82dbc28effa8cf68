"""Sign-in through a real OpenID Connect provider: a viewer cannot launch, an operator can.

The provider is ``oidc-provider-mock`` on a loopback port, started by the test; the app
reads an ``[auth]`` section from a temporary secrets file (``STREAMLIT_SECRETS_FILES``),
so ``st.login`` goes through the whole authorization-code flow in chromium: the app's
/auth/login, the provider's authorization form, the app's /oauth2callback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_app import running_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OPERATOR = "olga@lab.example"
VIEWER = "vic@lab.example"


@pytest.fixture(scope="module")
def signed_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(app URL, database URL) of an app whose sign-in goes to a local OIDC provider."""
    oidc = pytest.importorskip("oidc_provider_mock")
    folder: Path = tmp_path_factory.mktemp("sign_in")
    db_url = f"sqlite:///{folder / 'app.db'}"
    with oidc.run_server_in_thread() as provider:
        secrets = folder / "secrets.toml"
        secrets.write_text(
            "[auth]\n"
            'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
            'cookie_secret = "a-cookie-secret-for-the-sign-in-test"\n'
            'client_id = "latencylab"\n'
            'client_secret = "not-checked-by-the-mock"\n'
            f'server_metadata_url = "http://localhost:{provider.server_port}/.well-known/openid-configuration"\n'
        )
        env = {"STREAMLIT_SECRETS_FILES": str(secrets), "LATENCYLAB_OPERATORS": OPERATOR}
        with running_app(folder, db_url, worker=False, env=env) as url:
            yield url, db_url


def _sign_in(browser, url: str, email: str):
    """A fresh browser context signed in as ``email``; the page is on the Launch page."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{url}/launch")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Authorize Client").wait_for()  # the provider's form
    page.locator("input[name=sub]").fill(email)
    page.get_by_role("button", name="Authorize").click()
    page.get_by_text(f"Signed in as {email}").wait_for()  # back in the app, with a session cookie
    page.goto(f"{url}/launch")
    page.get_by_text("Launch a benchmark").wait_for()
    return context, page


def test_a_viewer_cannot_launch_and_an_operator_can(signed_app, browser) -> None:
    from storage import jobs, open_database

    url, db_url = signed_app
    context, page = _sign_in(browser, url, VIEWER)
    try:
        page.get_by_text(f"Cannot launch: launching jobs needs the operator role; {VIEWER} is a viewer").wait_for()
        assert page.get_by_role("button", name="Submit", exact=True).is_disabled()
        assert "viewer" in page.inner_text('[data-testid="stSidebar"]')
    finally:
        context.close()

    context, page = _sign_in(browser, url, OPERATOR)
    try:
        page.get_by_test_id("stSelectbox").filter(has_text="Preset").click()
        page.get_by_role("option", name="quick check: 16 in / 4 out").click()
        page.get_by_text("Ready: 1 job on cpu").wait_for()
        page.get_by_role("button", name="Submit", exact=True).click()
        page.get_by_text(re.compile(r"Queued job \d+")).wait_for()
    finally:
        context.close()
    [job] = jobs.list_jobs(open_database(db_url))
    assert job.status == "queued" and job.submitted_by == OPERATOR
