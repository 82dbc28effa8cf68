"""Tensor-parallel runs: one process per rank, launched by the measuring process itself.

transformers' ``tp_plan="auto"`` shards a model across the processes of a
``torch.distributed`` group (NCCL on GPUs, gloo on the CPU); every rank must make the
same calls in the same order. The measuring process (the CLI's ``run`` or a worker's
job process) is rank 0: :func:`start` sets its distributed environment and launches
ranks 1..N-1 as ``python -m engine.run.tensor_parallel SPEC_FILE``. Each follower runs the
same :func:`engine.run.runner.execute` on the same spec: the prompts are seeded and the
static batches fixed, so the generate calls line up, and only rank 0 measures and
stores. A follower that fails is reported with its own last line; followers die with
rank 0 (PR_SET_PDEATHSIG) and share its process group, so a worker's cancel or timeout
stops them all.

Only the static-batch loop runs tensor-parallel (arrival processes depend on timing, so
the ranks' batches would differ); the accuracy phase is not offered with it (the recipe's
``accuracy_problems`` say so).
"""

from __future__ import annotations

import _thread
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from engine.backends.base import BackendError
from engine.processes import die_with_parent, free_port
from engine.spec import JobSpec, SpecError

T = TypeVar("T")

FOLLOWER_ENV = "LATENCYLAB_TP_FOLLOWER"
_ENV_KEYS = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "LATENCYLAB_PINNED",
    "OMP_NUM_THREADS",
)


def world_size(spec: JobSpec) -> int:
    """Processes the run needs (1 unless the recipe is tensor-parallel: its engine launches one per rank)."""
    return spec.recipe.world_size(spec.device)


def is_follower() -> bool:
    """Whether this process is a follower rank (it must not store, log progress or evaluate)."""
    return os.environ.get(FOLLOWER_ENV) == "1"


def _rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
    }


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for line in reversed(lines):  # the exception line, not torchrun-style noise after it
        if "Error" in line or "error" in line:
            return line
    return lines[-1] if lines else ""


class Followers:
    """Ranks 1..N-1 of one run: started, watched, joined or killed."""

    def __init__(self, procs: list[subprocess.Popen[bytes]], logs: list[Path], workdir: Path) -> None:
        self.procs = procs
        self.logs = logs
        self.workdir = workdir
        self.failure: str | None = None
        self.failed_log = ""
        self._done = threading.Event()
        self._watch = threading.Thread(target=self._watchdog, name="tp-watchdog", daemon=True)
        self._watch.start()

    def _failed_rank(self) -> str | None:
        for rank, (proc, log) in enumerate(zip(self.procs, self.logs, strict=True), start=1):
            code = proc.poll()
            if code is not None and code != 0:
                return f"tensor-parallel rank {rank} failed (exit {code}): {_last_line(log) or 'no output'}"
        return None

    def _watchdog(self) -> None:
        # A dead follower can leave rank 0 waiting in a collective: interrupt it.
        while not self._done.wait(0.5):
            reason = self._failed_rank()
            if reason:
                self.failure = reason
                _thread.interrupt_main()
                return

    def join(self, timeout_s: float = 120.0) -> None:
        """Wait for every follower after rank 0 finished; raise with the reason if one failed."""
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        self._done.set()
        reason = self._failed_rank()
        if reason is None and any(p.poll() is None for p in self.procs):
            reason = f"a tensor-parallel rank did not finish within {timeout_s:.0f} s of rank 0"
        self.failed_log = self.tails() if reason else ""
        self.close()
        if reason:
            raise RuntimeError(reason)

    def reason_after_failure(self, grace_s: float = 3.0) -> str | None:
        """After rank 0 failed: the follower's own reason if one failed first (or just now)."""
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.failure is None:
            self.failure = self._failed_rank()
            if all(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.1)
        return self.failure or self._failed_rank()

    def tails(self, lines: int = 15) -> str:
        """The last lines of every follower that failed, for rank 0's log (the job log)."""
        out = []
        for rank, (proc, log) in enumerate(zip(self.procs, self.logs, strict=True), start=1):
            if proc.poll() not in (None, 0):
                try:
                    text = log.read_text(errors="replace").splitlines()[-lines:]
                except OSError:
                    continue
                out.append(f"--- rank {rank} (last {len(text)} lines) ---\n" + "\n".join(text))
        return "\n".join(out)

    def close(self) -> None:
        """Stop whatever still runs and remove the scratch folder."""
        self._done.set()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        shutil.rmtree(self.workdir, ignore_errors=True)


def start(spec: JobSpec, log: Callable[[str], None]) -> Followers:
    """Make this process rank 0 of a ``world_size(spec)`` group and launch the other ranks."""
    world = world_size(spec)
    port = free_port()
    env_common = _rank_env(0, world, port)
    if spec.device.startswith("cuda:") and os.environ.get("LATENCYLAB_PINNED") != "1":
        # LOCAL_RANK i must be the i-th GPU picked: count them from 0, as a worker does.
        env_common["CUDA_VISIBLE_DEVICES"] = spec.device.split(":", 1)[1]
        env_common["LATENCYLAB_PINNED"] = "1"
    if spec.device == "cpu":
        # The ranks share the cores: each gets its share instead of all of them.
        env_common["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // world))
    os.environ.update(env_common)
    workdir = Path(tempfile.mkdtemp(prefix="latencylab-tp-"))
    spec_file = workdir / "spec.json"
    spec_file.write_text(spec.canonical_json())
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    for rank in range(1, world):
        env = {**os.environ, **_rank_env(rank, world, port), FOLLOWER_ENV: "1"}
        log_path = workdir / f"rank{rank}.log"
        with open(log_path, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "engine.run.follower", str(spec_file)],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    preexec_fn=die_with_parent,
                )
            )
        logs.append(log_path)
    log(f"tensor parallel: {world} ranks (this process is rank 0; port {port})")
    return Followers(procs, logs, workdir)


@contextmanager
def _interruptible() -> Iterator[None]:
    """While rank 0 works, SIGINT raises KeyboardInterrupt, whatever handler the process had installed
    (the watchdog's ``interrupt_main`` goes through that handler); the previous one is put back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_with_followers(spec: JobSpec, body: Callable[[], T], log: Callable[[str], None]) -> T:
    """Run ``body`` (rank 0's work) with the follower ranks around it.

    The distributed variables set for rank 0 are put back afterwards, so later work in the
    same process (a benchmark's next recipe, a process a test spawns) does not see them.
    """
    saved = {key: os.environ.get(key) for key in _ENV_KEYS}
    try:
        followers = start(spec, log)
        try:
            with _interruptible():
                result = body()
        except (BackendError, SpecError):
            followers.close()  # rank 0's own reason is the clear one (the others fail alike)
            raise
        except BaseException as exc:
            reason = followers.reason_after_failure()
            if reason:
                log(followers.tails())
            followers.close()
            if reason:
                raise RuntimeError(reason) from exc
            raise
        try:
            followers.join()
        except RuntimeError:
            log(followers.failed_log)
            raise
        return result
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
