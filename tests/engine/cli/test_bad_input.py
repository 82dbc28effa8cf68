"""Bad input, tried as a new user would (issue 15, "No traceback, ever"): every case ends in one
line on stderr (exit 2, or 1 for a run that failed after it started) and stores nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from engine.cli.main import main
from storage import open_database

REPO = Path(__file__).resolve().parents[3]
HUGE = "999999999999999999999999999999"
TABLES = ("runs", "requests", "jobs")


def row_counts(db) -> dict[str, int]:
    """Rows per table (what a rejected input must leave unchanged)."""
    with db.engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in TABLES}


def one_line_error(capsys, code: int, expected: int = 2) -> str:
    """The single stderr line of a rejected command (and that it is single, with no traceback)."""
    err = capsys.readouterr().err
    assert code == expected, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "unexpected" not in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["show", HUGE],
        ["export", "--runs", HUGE],
        ["export", "--runs", f"1,{HUGE}"],
        ["cancel", HUGE],
        ["retry", HUGE],
        ["jobs", "--limit", HUGE],
        ["runs", "--limit", HUGE],
        ["export", "--runs", "1", "--baseline", HUGE],
        ["submit", "--model", "demo", "--seed", HUGE],
    ],
)
def test_huge_integers_are_one_line(args, db_url, db, capsys):
    before = row_counts(db)
    line = one_line_error(capsys, main([*args, "--db", db_url]))
    assert "out of range" in line
    assert row_counts(db) == before


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--runs", "²"],
        ["export", "--runs", "1,²"],
        ["show", "٣"],  # int() takes Arabic-Indic digits; ids are ASCII digits
        ["cancel", "１"],  # a full-width one
        ["retry", "1_0"],
        ["runs", "--limit", "٣"],
        ["submit", "--model", "demo", "--requests", "٣"],
    ],
)
def test_non_ascii_digits_are_one_line(args, db_url, db, capsys):
    before = row_counts(db)
    line = one_line_error(capsys, main([*args, "--db", db_url]))
    assert "not a whole number" in line
    assert row_counts(db) == before


def _spec_file(tmp_path: Path, content: bytes | str) -> str:
    path = tmp_path / "spec.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("[" * 100_000 + "]" * 100_000, "nests deeper"),
        ('{"model": ' * 5000 + "1" + "}" * 5000, "nests deeper"),
        ('{"model": {"source": "demo"}, "name": ' + "[" * 200 + "]" * 200 + "}", "nests deeper"),
        (b"\xff\xfe\x00garbage\x80", "not UTF-8"),
        ('{"model": "demo"}', 'model: must be a JSON object, e.g. {"source": "demo"}'),
        ('{"model": {"source": "demo"}, "workload": [1]}', "workload: must be a JSON object"),
        ("[1, 2]", "must hold a JSON object"),
        ("{", "not valid JSON"),
        ('{"model": {"source": "demo"}, "worklaod": {"requests": 2}}', "worklaod: unknown field"),
        ('{"model": {"source": "demo"}, "qualty": {"metrics": ["ppl"]}}', "qualty: unknown field"),
        ('{"model": {"source": "demo"}, "devcie": "cpu"}', "devcie: unknown field"),
    ],
)
@pytest.mark.parametrize("verb", ["submit", "run"])
def test_bad_spec_files_are_one_line(verb, content, fragment, tmp_path, db_url, db, capsys):
    before = row_counts(db)
    line = one_line_error(capsys, main([verb, "--spec", _spec_file(tmp_path, content), "--db", db_url]))
    assert fragment in line
    assert row_counts(db) == before


def test_spec_file_that_is_a_folder_or_missing(tmp_path, db_url, capsys):
    assert "cannot read spec file" in one_line_error(capsys, main(["submit", "--spec", str(tmp_path), "--db", db_url]))
    missing = str(tmp_path / "nope.json")
    assert "No such file" in one_line_error(capsys, main(["submit", "--spec", missing, "--db", db_url]))


def test_spec_file_keys_are_kept_and_options_override_them(tmp_path, db_url, db, capsys):
    spec = {"model": {"source": "demo"}, "device": "cpu", "name": "from file", "workload": {"requests": 3}}
    path = _spec_file(tmp_path, json.dumps(spec))
    assert main(["submit", "--spec", path, "--name", "from option", "--json", "--db", db_url]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["name"] == "from option" and job["spec"]["workload"]["requests"] == 3


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "0", "-5"])
def test_submit_timeout_must_be_finite_and_positive(value, db_url, db, capsys):
    before = row_counts(db)
    line = one_line_error(capsys, main(["submit", "--model", "demo", f"--timeout={value}", "--db", db_url]))
    assert "finite" in line or "positive" in line
    assert row_counts(db) == before


@pytest.mark.parametrize("option", ["--rate", "--burstiness", "--slo-ttft-ms", "--max-error-rate"])
def test_float_options_refuse_nan(option, db_url, capsys):
    assert "finite" in one_line_error(capsys, main(["submit", "--model", "demo", option, "nan", "--db", db_url]))


def test_database_folder_that_cannot_be_created(capsys):
    line = one_line_error(capsys, main(["runs", "--db", "sqlite:////proc/nope/x.db"]))
    assert "cannot create the folder" in line


def test_unreachable_postgres_is_one_line_without_the_password(capsys):
    line = one_line_error(capsys, main(["runs", "--db", "postgresql+psycopg://me:s3cret@127.0.0.1:1/x"]))
    assert "Connection refused" in line and "Is the server running" in line
    assert "s3cret" not in line


def test_sqlalchemy_background_line_is_dropped():
    from sqlalchemy.exc import OperationalError

    from storage.db import _one_line

    exc = OperationalError("SELECT 1", {}, Exception("no such table: x"))
    assert "Background on this error" in str(exc)
    assert _one_line(exc) == "no such table: x"


def _read_only(db_url: str) -> str:
    open_database(db_url)  # the schema at head
    return "sqlite:///file:" + db_url.split("///", 1)[1] + "?mode=ro&uri=true"


def test_read_only_database_submit(db_url, capsys):
    line = one_line_error(capsys, main(["submit", "--model", "demo", "--db", _read_only(db_url)]))
    assert "cannot be written" in line and "readonly" in line


def test_read_only_database_run_fails_before_loading(db_url, capsys, monkeypatch):
    from engine.run import runner

    def must_not_run(*_a, **_k):
        raise AssertionError("the benchmark ran although its result could not be stored")

    monkeypatch.setattr(runner, "execute", must_not_run)
    ro = _read_only(db_url)
    line = one_line_error(capsys, main(["run", "--model", "demo", "--requests", "1", "--db", ro]))
    assert "cannot be written" in line


def test_sqlite_uri_creates_no_stray_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    open_database(f"sqlite:///file:{tmp_path / 'u.db'}?uri=true")
    assert not (tmp_path / "file:").exists()


def test_drop_layers_at_least_the_layer_count_is_refused_before_loading(db_url, db, capsys, monkeypatch):
    from engine.run import runner

    monkeypatch.setattr(runner, "execute", lambda *_a, **_k: pytest.fail("loaded the model"))
    line = one_line_error(capsys, main(["run", "--model", "demo", "--knob", "drop_layers=1000", "--db", db_url]))
    assert "drop at most 29" in line  # the demo model has 30 decoder layers (its declared config)
    line = one_line_error(capsys, main(["submit", "--model", "demo", "--knob", "drop_layers=30", "--db", db_url]))
    assert "30 decoder layers" in line
    assert row_counts(db) == {t: 0 for t in TABLES}


@pytest.mark.parametrize("content", [b"", b"\n \n", b"\xff\xfe\x00\x81" * 50])
def test_empty_or_binary_prompt_file_is_refused_before_loading(content, tmp_path, db_url, capsys, monkeypatch):
    from engine.run import runner

    monkeypatch.setattr(runner, "execute", lambda *_a, **_k: pytest.fail("loaded the model"))
    path = tmp_path / "prompts.txt"
    path.write_bytes(content)
    line = one_line_error(capsys, main(["run", "--model", "demo", "--prompt-file", str(path), "--db", db_url]))
    assert "prompt file" in line


def _cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LATENCYLAB_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "engine", *args], cwd=REPO, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.mark.slow
def test_run_failing_after_start_prints_one_line_and_logs_the_traceback(tmp_path, db_url):
    folder = tmp_path / "no-weights"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2}))
    proc = _cli("run", "--model", str(folder), "--db", db_url, data_dir=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run 1 failed: ") and "--verbose prints it" in last
    log = tmp_path / "logs" / "run-1.log"
    assert "Traceback (most recent call last)" in log.read_text()
    verbose = _cli("run", "--model", str(folder), "--db", db_url, "--verbose", data_dir=tmp_path)
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr


def test_unexpected_errors_are_one_line_and_verbose_shows_the_traceback(db_url, capsys, monkeypatch):
    from engine.cli import runs

    def boom(*_a, **_k):
        raise ZeroDivisionError("a bug\nover two lines")

    monkeypatch.setattr(runs, "run_row", boom)
    monkeypatch.setattr("storage.runs.list_runs", lambda *_a, **_k: [object()])
    assert main(["runs", "--json", "--db", db_url]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "error: unexpected ZeroDivisionError: a bug over two lines (rerun with --verbose for the traceback)"
    ]
    assert main(["runs", "--json", "--verbose", "--db", db_url]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


# -- issue 26: input edges a hostile-input probe found, and the first command a new user types --------------
def test_the_engine_without_a_verb_prints_a_short_usage(capsys):
    """Issue 26, item 5: ``python -m engine`` with no verb printed 30 lines of usage."""
    assert main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 3 and err[0].startswith("usage: python -m engine VERB") and "run --model demo" in err[-1]


def test_a_sweep_name_is_capped_and_the_cap_named(db_url, db, capsys):
    """Issue 26, item 6: ``submit --sweep`` accepted a 100,000-character sweep name (names are capped at 200)."""
    before = row_counts(db)
    line = one_line_error(capsys, main(["submit", "--model", "demo", "--sweep", "s" * 100_000, "--db", db_url]))
    assert "at most 200" in line and len(line) < 300
    assert row_counts(db) == before


@pytest.mark.parametrize("flag", ["--name", "--sweep"])
def test_names_with_control_characters_are_refused(flag, db_url, db, capsys):
    """Issue 26, item 6: a job name with control characters (ESC, BEL) was stored as is."""
    before = row_counts(db)
    line = one_line_error(capsys, main(["submit", "--model", "demo", flag, "a\x1b[31mb\x07c", "--db", db_url]))
    assert "control characters" in line and "\x1b" not in line and "\x07" not in line
    assert row_counts(db) == before


def test_an_error_about_a_huge_model_id_quotes_a_short_prefix(db_url, capsys):
    """Issue 26, item 6: the error for a 100,000-character model id repeated the whole id (a 100 kB line)."""
    for model in ("m" * 100_000, "m/" * 1500):
        line = one_line_error(capsys, main(["submit", "--model", model, "--db", db_url]))
        assert len(line) < 400, len(line)


def test_a_prompt_file_that_is_a_folder_is_called_a_folder(tmp_path, db_url, capsys):
    """Issue 26, item 6: ``--prompt-file`` given a directory said the file "does not exist"."""
    line = one_line_error(capsys, main(["submit", "--model", "demo", "--prompt-file", str(tmp_path), "--db", db_url]))
    assert "is a folder, not a file" in line and "does not exist" not in line


def test_an_unknown_hub_id_on_a_machine_without_the_hub_is_refused_in_seconds(tmp_path, db_url):
    """Issue 26, item 5: an unknown Hugging Face id on a machine without the Hub was queued, retried for 57 s
    and failed; pre-flight asks the Hub once, briefly, and says it cannot be reached."""
    import time

    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"))  # nothing listens on port 9
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "engine", "submit", "--model", "nosuchorg/nosuchmodel", "--db", db_url],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "the Hugging Face Hub cannot be reached from here" in out.stderr
    assert time.monotonic() - start < 30
    assert "queued" not in out.stdout
