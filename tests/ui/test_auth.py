"""Sign-in and roles (ui/auth.py, app.py's gate) and who may serve where (run_app.sh, engine.settings).

The pages run under AppTest with Streamlit's own test doubles for sign-in: ``at.secrets``
holds an ``[auth]`` section (sign-in on) and ``at.user`` the signed-in identity.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.settings import Settings, get_settings, is_loopback, serve_problem, sign_in_configured
from engine.spec import parse_job_spec
from storage import jobs
from storage.runs import NewRun, get_run, save_run
from ui.auth import ADMIN, OPERATOR, VIEWER, Identity, cannot, role_for

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "app.py")
QUICK = "quick check: 16 in / 4 out"
AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "a-test-cookie-secret-of-some-length",
    "client_id": "latencylab",
    "client_secret": "unused",
    "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",
}
ROLES = {"LATENCYLAB_OPERATORS": "olga@lab.example, @ops.example", "LATENCYLAB_ADMINS": "ada@lab.example"}


@pytest.fixture(autouse=True)
def _settings(monkeypatch):
    for name, value in ROLES.items():
        monkeypatch.setenv(name, value)
    for name in ("LATENCYLAB_VIEWER_MODE", "LATENCYLAB_ALLOW_OPEN", "LATENCYLAB_HOST"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _spec(seed: int = 0):
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, "seed": seed},
        }
    )


def _page(db_url: str, monkeypatch, page: str, email: str | None, *, signed_in: bool = True) -> AppTest:
    """``page`` under AppTest with sign-in on, as ``email`` (or signed out)."""
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.secrets["auth"] = dict(AUTH)
    at.user = {"is_logged_in": signed_in, **({"email": email} if email else {})}
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


# -- roles (pure) ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("email", "role"),
    [
        ("olga@lab.example", OPERATOR),
        ("OLGA@Lab.Example ", OPERATOR),  # e-mails compare without case or spaces
        ("anyone@ops.example", OPERATOR),  # a listed domain
        ("ada@lab.example", ADMIN),
        ("vic@lab.example", VIEWER),  # signed in, not listed
        ("eve@evilops.example", VIEWER),  # a domain matches whole, not as a suffix
        ("eve@sub.ops.example", VIEWER),
        ("ops.example", VIEWER),  # not an e-mail
        (None, VIEWER),
    ],
)
def test_roles_from_configuration(email, role):
    assert role_for(email, Settings()) == role


def test_operator_actions_need_the_operator_role():
    viewer = Identity(role=VIEWER, actor="vic@lab.example", email="vic@lab.example", signed_in=True)
    for action in ("launch", "cancel", "retry", "delete", "calibrate"):
        assert "needs the operator role" in cannot(action, viewer)
        assert cannot(action, Identity(role=OPERATOR, actor="o", signed_in=True)) is None
        assert cannot(action, Identity(role=ADMIN, actor="a", signed_in=True)) is None
    assert cannot("launch", Identity(role=VIEWER, actor=None, viewer_mode=True)).startswith("viewer mode")


# -- who may serve where ------------------------------------------------------------------------
def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "localhost", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "", "::", "10.0.0.5", "lab.example", None))


def test_serve_problem_rule(monkeypatch):
    assert serve_problem("127.0.0.1", signed_in=False, settings=Settings()) == (None, None)
    refusal, warning = serve_problem("0.0.0.0", signed_in=False, settings=Settings())
    assert "refusing to serve on 0.0.0.0" in refusal and warning is None
    assert serve_problem("0.0.0.0", signed_in=True, settings=Settings()) == (None, None)
    monkeypatch.setenv("LATENCYLAB_VIEWER_MODE", "1")
    assert serve_problem("0.0.0.0", signed_in=False, settings=Settings()) == (None, None)
    monkeypatch.delenv("LATENCYLAB_VIEWER_MODE")
    monkeypatch.setenv("LATENCYLAB_ALLOW_OPEN", "1")
    refusal, warning = serve_problem("0.0.0.0", signed_in=False, settings=Settings())
    assert refusal is None and "WARNING" in warning


def test_sign_in_configured_reads_the_auth_section(tmp_path):
    good, partial, broken = tmp_path / "good.toml", tmp_path / "partial.toml", tmp_path / "broken.toml"
    good.write_text('[auth]\nredirect_uri = "http://x/oauth2callback"\ncookie_secret = "s"\n')
    partial.write_text('[auth]\nclient_id = "x"\n')
    broken.write_bytes(b"\xff[auth")
    assert sign_in_configured([good])
    assert not sign_in_configured([partial, broken, tmp_path / "missing.toml"])


def _check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``run_app.sh --check``: the script's decision only; no server is started."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LATENCYLAB_", "STREAMLIT_"))}
    full = {
        **clean,
        "LATENCYLAB_BIN": str(Path(sys.executable).parent),
        "PYTHONPATH": str(REPO),
        "HOME": str(tmp_path),  # no ~/.streamlit/secrets.toml of the machine's user
        "STREAMLIT_SECRETS_FILES": str(tmp_path / "none.toml"),
        **env,
    }
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "run_app.sh"), "--check"],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


def test_run_app_script_refuses_an_open_host_without_sign_in(tmp_path):
    assert _check(tmp_path).returncode == 0  # the default, 127.0.0.1
    assert _check(tmp_path, LATENCYLAB_HOST="::1").returncode == 0
    for host in ("0.0.0.0", "192.0.2.10"):
        refused = _check(tmp_path, LATENCYLAB_HOST=host)
        assert refused.returncode == 2
        assert f"refusing to serve on {host}" in refused.stderr and "allowed" not in refused.stdout
    assert _check(tmp_path, LATENCYLAB_HOST="0.0.0.0", LATENCYLAB_VIEWER_MODE="1").returncode == 0
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://lab:8501/oauth2callback"\ncookie_secret = "s3cret"\n')
    assert _check(tmp_path, LATENCYLAB_HOST="0.0.0.0", STREAMLIT_SECRETS_FILES=str(secrets)).returncode == 0
    opened = _check(tmp_path, LATENCYLAB_HOST="0.0.0.0", LATENCYLAB_ALLOW_OPEN="1")
    assert opened.returncode == 0 and "WARNING: LATENCYLAB_ALLOW_OPEN=1" in opened.stderr


def test_app_refuses_an_open_address_without_sign_in(db_url, monkeypatch):
    """The app's own check: bound to every interface, no sign-in, no viewer mode."""
    import ui.auth

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    monkeypatch.setattr(ui.auth, "_served_host", lambda: "0.0.0.0")  # st.get_option("server.address")
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    assert any("refusing to serve on 0.0.0.0" in e.value for e in at.error)
    assert not at.title  # no page ran
    monkeypatch.setenv("LATENCYLAB_ALLOW_OPEN", "1")
    get_settings.cache_clear()
    at.run()
    assert any("LATENCYLAB_ALLOW_OPEN" in w.value for w in at.warning)
    assert at.title and not at.exception


# -- the pages, signed in -------------------------------------------------------------------------
def test_signed_out_users_see_only_the_sign_in_page(db_url, monkeypatch):
    at = _page(db_url, monkeypatch, "views/launch.py", None, signed_in=False)
    assert [b.label for b in at.button] == ["Sign in"]
    assert [t.value for t in at.title] == ["LatencyLab"]


def test_a_viewer_cannot_launch(db, db_url, monkeypatch):
    at = _page(db_url, monkeypatch, "views/launch.py", "vic@lab.example")
    submit = at.button(key="submit")
    assert submit.disabled
    assert "needs the operator role" in submit.help
    assert any("Launching jobs needs the operator role; vic@lab.example is a viewer" in i.value for i in at.info)
    assert any(i.value.startswith("Cannot launch: launching jobs needs") for i in at.info)  # beside Submit
    assert not at.success  # not "Ready" for someone who cannot submit
    assert any("vic@lab.example" in c.value and "viewer" in c.value for c in at.sidebar.caption)
    assert jobs.list_jobs(db) == []


def test_an_operator_launches_and_is_recorded(db, db_url, monkeypatch):
    at = _page(db_url, monkeypatch, "views/launch.py", "olga@lab.example")
    at.selectbox(key="preset").select(QUICK).run()
    assert not at.button(key="submit").disabled
    at.button(key="submit").click().run()
    assert not at.exception
    (job,) = jobs.list_jobs(db)
    assert job.submitted_by == "olga@lab.example"


def test_the_submit_handler_asks_again(db, db_url, monkeypatch):
    """The form was rendered for an operator; by the click the account is a viewer: nothing queued."""
    at = _page(db_url, monkeypatch, "views/launch.py", "olga@lab.example")
    at.selectbox(key="preset").select(QUICK).run()
    at.user = {"is_logged_in": True, "email": "vic@lab.example"}
    at.button(key="submit").click().run()
    assert not at.exception
    assert jobs.list_jobs(db) == []


def test_jobs_page_gates_cancel_and_retry_and_shows_who(db, db_url, monkeypatch):
    failed, queued = jobs.submit_many(db, [_spec(0), _spec(1)], submitted_by="olga@lab.example")
    jobs.claim(db, "w1", ["cpu"])  # the oldest queued job is claimed first
    jobs.mark_started(db, failed, "w1")
    jobs.finish(db, failed, "w1", "failed", error="boom")
    at = _page(db_url, monkeypatch, "views/jobs.py", "vic@lab.example")
    cancel, retry = at.button(key=f"cancel_{queued}"), at.button(key=f"retry_{failed}")
    assert cancel.disabled and retry.disabled and "needs the operator role" in cancel.help
    assert any("submitted by olga@lab.example" in c.value for c in at.caption)
    at = _page(db_url, monkeypatch, "views/jobs.py", "anyone@ops.example")
    at.button(key=f"cancel_{queued}").click().run()
    assert jobs.get_job(db, queued).cancelled_by == "anyone@ops.example"
    at.button(key=f"retry_{failed}").click().run()
    newest = jobs.list_jobs(db)[0]
    assert newest.id not in (queued, failed) and newest.submitted_by == "anyone@ops.example"
    assert any("cancelled by anyone@ops.example" in c.value for c in at.caption)


def test_run_page_shows_who_launched_and_gates_delete(db, db_url, monkeypatch):
    job_id = jobs.submit(db, _spec(), submitted_by="olga@lab.example")
    spec = _spec().model_dump(mode="json")
    run_id = save_run(db, NewRun(status="failed", spec=spec, fingerprint="f", model="demo", engine="transformers",
                                 device="cpu", error="x", job_id=job_id))  # fmt: skip
    assert get_run(db, run_id).submitted_by == "olga@lab.example"  # inherited from its job
    at = _page(db_url, monkeypatch, "views/run.py", "vic@lab.example")
    at.query_params["run"] = str(run_id)
    at.run()
    assert any("launched by `olga@lab.example`" in c.value for c in at.caption)
    delete = next(b for b in at.button if b.label == "Delete run")
    assert delete.disabled and "needs the operator role" in delete.help
    at = _page(db_url, monkeypatch, "views/run.py", "ada@lab.example")
    at.query_params["run"] = str(run_id)
    at.run()
    at.checkbox(key="confirm_delete").check().run()
    next(b for b in at.button if b.label == "Delete run").click().run()
    assert get_run(db, run_id) is None
    assert jobs.get_job(db, job_id).deleted_by == "ada@lab.example"


def test_whatif_calibration_needs_an_operator(db, db_url, monkeypatch):
    at = _page(db_url, monkeypatch, "views/whatif.py", "vic@lab.example")
    calibrate = next(b for b in at.button if b.label.startswith("Run the calibration"))
    assert calibrate.disabled and "needs the operator role" in calibrate.help


def test_viewer_mode_makes_a_listed_operator_a_viewer(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_VIEWER_MODE", "1")
    get_settings.cache_clear()
    at = _page(db_url, monkeypatch, "views/launch.py", "olga@lab.example")
    assert at.button(key="submit").disabled
    assert any("Viewer mode" in i.value for i in at.info)


def test_without_sign_in_everyone_local_is_an_operator(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("views/launch.py")
    at.run()
    at.selectbox(key="preset").select(QUICK).run()
    at.button(key="submit").click().run()
    (job,) = jobs.list_jobs(db)
    assert job.submitted_by.startswith("local:")
