"""Where a load driver's client processes run, and how it reaches each: a launcher.

:class:`LocalLauncher` starts them on this host, ``python -m engine.backends.openai.client_process FD``
with a socket pair each; ``RayLauncher`` (engine/jobs/ray_load.py, ``--load-nodes``) starts them as Ray
actors on other nodes. :func:`remote_settings` is what a process on another node needs beyond the local
settings: the API key itself and the tokenizer's files (it has neither the job's environment nor its
model folder).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.backends.base import Handle, Progress
from engine.processes import die_with_parent

_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the engine package


class _Child:
    """A client process on this host: its ``Popen`` and its log."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc, self.log, self.pid = proc, log, proc.pid

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def last_words(self) -> str:
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def stop(self) -> None:
        """Wait for it to end (after ``stop``), then SIGTERM, then SIGKILL; remove its log."""
        for signal_it in (None, self.proc.terminate, self.proc.kill):
            if signal_it is not None:
                signal_it()
            try:
                self.proc.wait(timeout=5.0)
                break
            except subprocess.TimeoutExpired:
                continue
        self.log.unlink(missing_ok=True)


class LocalLauncher:
    """Client processes on this host, ``python -m engine.backends.openai.client_process FD``, a socket pair each."""

    remote = False

    def launch(self, n: int, progress: Progress) -> list[tuple[socket.socket, Handle]]:
        return [self._spawn(index) for index in range(n)]

    def _spawn(self, index: int) -> tuple[socket.socket, Handle]:
        ours, theirs = socket.socketpair()
        fd, log = tempfile.mkstemp(prefix=f"client-process-{index}-", suffix=".log")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH")) if p)}
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine.backends.openai.client_process", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                env=env,
                preexec_fn=die_with_parent,
            )
        finally:
            os.close(fd)
            theirs.close()
        return ours, _Child(proc, Path(log))

    def close(self) -> None:
        pass
