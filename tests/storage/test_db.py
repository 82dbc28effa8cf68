"""storage.db: the schema is created once even when many processes open a new database at the
same moment; errors are one line; unwritable databases are found before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage import StorageError, open_database
from storage.db import Database, safe_url, sqlite_path

REPO = Path(__file__).resolve().parents[2]

# Each child waits for the go file, so that all of them migrate the new database at once.
_CHILD = """
import os, sys, time
from storage import jobs, open_database
from engine.spec import parse_job_spec
import alembic.command, alembic.config, sqlalchemy.dialects.sqlite  # imported before the barrier
go = sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.002)
db = open_database(sys.argv[1])
jobs.submit(db, parse_job_spec({"model": {"source": "demo"}}), sweep=None, timeout_s=60.0)
"""


@pytest.mark.slow
def test_twenty_parallel_processes_create_a_new_sqlite_database_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, url, str(go)], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True
        )
        for _ in range(20)
    ]
    time.sleep(8)  # let the interpreters start and import (not a timing assertion: the go file is the barrier)
    go.touch()
    errors = [p.communicate(timeout=600)[1] for p in procs]
    failed = [e.strip().splitlines()[-1] for p, e in zip(procs, errors, strict=True) if p.returncode != 0]
    assert not failed, failed
    from storage import jobs

    assert len(jobs.list_jobs(open_database(url), limit=100)) == 20


def test_migration_takes_a_lock_file_next_to_the_database(tmp_path):
    open_database(f"sqlite:///{tmp_path / 'x.db'}")
    assert (tmp_path / "x.db.lock").exists()


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////tmp/a.db", "/tmp/a.db"),
        ("sqlite:///file:/tmp/a.db?mode=ro&uri=true", "/tmp/a.db"),
        ("sqlite:///:memory:", None),
        ("sqlite://", None),
    ],
)
def test_sqlite_path(url, path):
    assert sqlite_path(url) == (Path(path) if path else None)


def test_safe_url_hides_only_the_password():
    assert safe_url("postgresql+psycopg://me:pw@host/db") == "postgresql+psycopg://me:***@host/db"
    assert safe_url("sqlite:////tmp/a.db") == "sqlite:////tmp/a.db"


def test_check_writable(tmp_path):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    open_database(url).check_writable()  # writable: no error, nothing changed
    ro = Database(f"sqlite:///file:{tmp_path / 'w.db'}?mode=ro&uri=true")
    with pytest.raises(StorageError, match="cannot be written: attempt to write a readonly database"):
        ro.check_writable()


def test_database_errors_are_one_line(tmp_path):
    db = open_database(f"sqlite:///{tmp_path / 'e.db'}")
    from sqlalchemy import text

    with pytest.raises(StorageError) as info, db.session() as s:
        s.execute(text("SELECT * FROM no_such_table"))
    assert "\n" not in str(info.value) and "Background" not in str(info.value)


def test_a_database_at_every_head_opens_without_alembic(tmp_path) -> None:
    import subprocess
    import sys

    from storage import open_database
    from storage.db import Database, migration_heads

    url = f"sqlite:///{tmp_path / 'heads.db'}"
    open_database(url)  # made and migrated by Alembic
    assert migration_heads() and Database(url).at_heads()
    probe = (
        "import sys; from storage.db import Database; Database(sys.argv[1]).migrate(); print('alembic' in sys.modules)"
    )
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", probe, url], capture_output=True, text=True, timeout=60, check=True, cwd=repo
    )
    assert out.stdout.strip() == "False"
    assert not Database(f"sqlite:///{tmp_path / 'new.db'}").at_heads()
