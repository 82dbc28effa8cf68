"""A process burning one core outside the test process's tree (tests of contention findings and flags)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def burning_core(seconds: float) -> Iterator[int]:
    """A process spinning one core for at most ``seconds``, outside this process's tree (double fork)."""
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
    out = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', code],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(out.stdout.strip())
    try:
        yield pid
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
