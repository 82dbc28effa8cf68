"""Launch says where jobs may read files (AppTest): every path field's help names the allowed folders, a local
app without sign-in says it reads anywhere, and with sign-in on a file outside the folders is refused in one
line that never quotes it (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from storage import jobs

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PRESET = "chat: 128 in / 128 out"
TRACE = f"tr_{PRESET}_trace_trace"
PASSWD = "zorro:x:0:0:zorro:/zorro:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n"


def _app(db_url: str, monkeypatch, secrets: Path) -> AppTest:
    from engine.settings import get_settings

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    monkeypatch.setenv("STREAMLIT_SECRETS_FILES", str(secrets))
    monkeypatch.delenv("LATENCYLAB_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("LATENCYLAB_ALLOWED_MODEL_ROOTS", raising=False)
    get_settings.cache_clear()
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.switch_page("views/launch.py")
    at.run()
    assert not at.exception
    return at


@pytest.fixture
def signed_in_app(db, db_url, monkeypatch, tmp_path):
    """Launch with sign-in configured for the engine's checks (AppTest's own session is the local operator)."""
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://127.0.0.1:1/oauth2callback"\ncookie_secret = "s"\n')
    yield _app(db_url, monkeypatch, secrets)
    from engine.settings import get_settings

    get_settings.cache_clear()


def _texts(at: AppTest) -> str:
    parts = [e.value for kind in ("error", "caption", "markdown", "info", "success", "warning") for e in at.get(kind)]
    return " ".join(str(p) for p in parts)


def test_without_sign_in_launch_says_it_reads_anywhere(db, db_url, monkeypatch, tmp_path):
    at = _app(db_url, monkeypatch, tmp_path / "no-secrets.toml")
    assert "This app reads files anywhere on this machine: sign-in is off." in [c.value for c in at.caption]
    at.radio(key="traffic").set_value("trace").run()
    assert "sign-in is off" in at.text_input(key=TRACE).help


def test_with_sign_in_on_every_path_field_names_the_allowed_folders(signed_in_app):
    from engine.settings import get_settings

    at = signed_in_app
    traces = str(get_settings().data_dir / "traces")
    assert any(c.value.startswith("Jobs read files only from ") and traces in c.value for c in at.caption)
    for source, field in (("trace", "trace"), ("dataset", "dataset"), ("sessions", "dataset"), ("prompt_file",) * 2):
        at.radio(key="traffic").set_value(source).run()
        assert traces in (at.text_input(key=f"tr_{PRESET}_{source}_{field}").help or ""), source
    at.radio(key="model_kind").set_value("local").run()
    assert traces in at.text_input(key="model_local").help


def test_with_sign_in_on_a_trace_outside_is_refused_without_quoting_it(signed_in_app, db):
    at = signed_in_app
    at.radio(key="traffic").set_value("trace").run()
    at.text_input(key=TRACE).input("/etc/passwd").run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert errors[0].startswith("Cannot launch: trace /etc/passwd is outside the folders this app reads with sign")
    assert "root" not in _texts(at).replace("pytest-of-root", "")  # not a line of the file
    assert at.button(key="submit").disabled
    assert jobs.list_jobs(db) == []


def test_a_file_inside_the_folders_that_is_no_trace_is_refused_without_its_lines(signed_in_app, db):
    from engine.settings import get_settings

    at = signed_in_app
    folder = get_settings().data_dir / "traces"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "passwd.csv").write_text(PASSWD)
    at.radio(key="traffic").set_value("trace").run()
    at.selectbox(key=f"tr_{PRESET}_trace_trace_format").set_value("azure").run()
    at.text_input(key=TRACE).input(str(folder / "passwd.csv")).run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "no such column" in errors[0] and "header, 1 field," in errors[0], errors
    assert "zorro" not in _texts(at) and "alice" not in _texts(at)
    assert at.button(key="submit").disabled and jobs.list_jobs(db) == []
