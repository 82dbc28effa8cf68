"""Helpers for the child processes a job starts (vLLM servers, tensor-parallel ranks)."""

from __future__ import annotations

import os
import signal
import socket


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent() -> None:
    """In the child: SIGTERM when the job process dies, even by SIGKILL (Linux PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass  # not Linux: teardown relies on unload() and atexit


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to a process group that may already be gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
