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
from typing import Any, Protocol

from engine.backends.base import Progress
from engine.processes import die_with_parent

_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the engine package


class Handle(Protocol):
    """A started client process as its launcher knows it."""

    pid: int

    def exit_code(self) -> int | None: ...

    def last_words(self) -> str: ...

    def stop(self) -> None: ...


class Launcher(Protocol):
    """Starts ``n`` client processes; each comes with the socket the driver talks to it on."""

    remote: bool  # on other hosts: settings carry the key and the tokenizer files; clocks are offset

    def launch(self, n: int, progress: Progress) -> list[tuple[socket.socket, Handle]]: ...

    def close(self) -> None: ...


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


def remote_settings(settings: dict[str, Any], api_key: str | None, tokenizer: Any) -> dict[str, Any]:
    """``settings`` (a client's :meth:`client_settings`) for a process on another node: the key itself,
    and a local tokenizer's files inline."""
    out = dict(settings)
    if api_key:
        out["api_key"] = api_key
    files = getattr(tokenizer, "files", ()) if out.get("tokenizer") else ()
    if out.get("tokenizer") and out["tokenizer"].get("kind") == "files" and files:
        folder = Path(files[0]).parent
        names = [Path(f).name for f in files] + ["chat_template.jinja"]
        out["tokenizer"] = {
            "kind": "inline",
            "files": {n: (folder / n).read_text(encoding="utf-8") for n in names if (folder / n).is_file()},
        }
    return out
