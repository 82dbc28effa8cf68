"""Fixtures of the storage tests: a throwaway PostgreSQL server (Debian's, started in a temporary folder)."""

from __future__ import annotations

import pytest


def _pg_bin() -> str | None:
    import glob

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return found[-1].rsplit("/", 1)[0] if found else None


@pytest.fixture(scope="module")
def pg_url():
    """A throwaway PostgreSQL server (unix socket only), skipped where it cannot start."""
    import os
    import shutil
    import socket
    import subprocess

    pytest.importorskip("psycopg")
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="latencylab-pg-"))  # not under pytest's root-only folder
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser")
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = lambda *cmd: subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120)  # noqa: E731
    init = run(f"{bindir}/initdb", "-D", str(data), "-U", "postgres", "-A", "trust")
    if init.returncode != 0:
        pytest.skip(f"initdb failed: {init.stderr.strip()[-300:]}")
    start = run(
        f"{bindir}/pg_ctl",
        "-D",
        str(data),
        "-w",
        "-l",
        str(root / "log"),
        "-o",
        f"-p {port} -k {sock} -c listen_addresses=''",
        "start",
    )
    if start.returncode != 0:
        pytest.skip(f"PostgreSQL did not start: {start.stderr.strip()[-300:]}")
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={sock}&port={port}"
    finally:
        run(f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
