"""Tensor parallelism on the CPU: real ranks over gloo, launched by the measuring process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.run import tensor_parallel
from engine.spec import parse_job_spec


def _spec(ranks: int = 3, workload: dict | None = None):
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "recipe": {"engine": "transformers", "tensor_parallel": True, "tensor_parallel_ranks": ranks},
            "workload": workload or {"prompt_tokens": 16, "output_tokens": 6, "requests": 2, "warmup_requests": 1},
        }
    )


@pytest.mark.slow
@pytest.mark.alone
def test_demo_model_runs_sharded_over_three_ranks(demo_folder: Path, db) -> None:
    import torch

    from engine.run.runner import ProgressState, run_benchmark
    from storage import runs

    threads_before = torch.get_num_threads()
    result = run_benchmark(_spec(3), db, ProgressState(), log=lambda _m: None)
    applied = result.provenance["applied"]
    assert applied["tensor_parallel"] == "tp_plan=auto over 3 ranks"
    assert applied["threads_per_rank"] >= 1
    assert applied["recipe"].endswith("tensor parallel x3")
    measured = [r for r in result.requests if not r.warmup]
    assert [r.output_tokens for r in measured] == [6, 6]
    assert runs.get_run(db, result.run_id).status == "done"
    # a second sharded run in the same process gets a new group (benchmarks and sweeps do this)
    again = run_benchmark(_spec(3), db, ProgressState(), log=lambda _m: None)
    assert runs.get_run(db, again.run_id).status == "done"
    # and nothing of rank 0's set-up stays behind for the process's next work
    assert torch.get_num_threads() == threads_before
    assert "WORLD_SIZE" not in os.environ and "MASTER_PORT" not in os.environ


def test_heads_that_do_not_split_are_refused_before_loading() -> None:
    from engine.run.runner import preflight
    from engine.spec import SpecError

    with pytest.raises(SpecError, match="9 attention heads, 3 key/value heads and 1536 MLP columns .* use 3 ranks"):
        preflight(_spec(2))


def _followers(tmp_path: Path, *scripts: str) -> tensor_parallel.Followers:
    procs, logs = [], []
    for i, code in enumerate(scripts):
        log = tmp_path / f"rank{i + 1}.log"
        with open(log, "wb") as out:
            procs.append(subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT))
        logs.append(log)
    work = tmp_path / "work"
    work.mkdir()
    return tensor_parallel.Followers(procs, logs, work)


def test_a_failing_rank_interrupts_rank_0_with_its_own_reason(tmp_path: Path, monkeypatch) -> None:
    fail = "import sys, time; time.sleep(0.3); print('torch.OutOfMemoryError: CUDA out of memory'); sys.exit(3)"
    monkeypatch.setattr(tensor_parallel, "start", lambda spec, log: _followers(tmp_path, fail))

    def rank0_waits_in_a_collective() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.05)

    started = time.monotonic()
    logged: list[str] = []
    with pytest.raises(RuntimeError, match="rank 1 failed \\(exit 3\\): torch.OutOfMemoryError: CUDA out of memory"):
        tensor_parallel.run_with_followers(_spec(3), rank0_waits_in_a_collective, log=logged.append)
    assert time.monotonic() - started < 10
    assert any("--- rank 1" in line and "CUDA out of memory" in line for line in logged)  # in the job log


def test_rank_0s_own_clear_error_wins(tmp_path: Path, monkeypatch) -> None:
    from engine.backends.base import BackendError

    fail = "import sys, time; time.sleep(2); print('RuntimeError: Connection closed by peer'); sys.exit(1)"
    monkeypatch.setattr(tensor_parallel, "start", lambda spec, log: _followers(tmp_path, fail))

    def rank0_fails_to_load() -> None:
        time.sleep(0.3)
        raise BackendError("out of memory while loading the model on cpu")

    with pytest.raises(BackendError, match="out of memory while loading"):
        tensor_parallel.run_with_followers(_spec(3), rank0_fails_to_load, log=lambda _m: None)


def test_followers_are_joined_and_cleaned_up(tmp_path: Path) -> None:
    ok = _followers(tmp_path, "print('done')", "print('done')")
    ok.join(timeout_s=30)
    assert not ok.workdir.exists()

    (tmp_path / "hung").mkdir()
    hung = _followers(tmp_path / "hung", "import time; time.sleep(60)")
    with pytest.raises(RuntimeError, match="did not finish"):
        hung.join(timeout_s=0.5)
    assert all(p.poll() is not None for p in hung.procs)  # killed, not left behind


def _waits_in_a_collective() -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_failing_rank_interrupts_rank_0_whatever_sigint_handler_was_installed(tmp_path: Path, monkeypatch) -> None:
    import signal

    fail = "import sys, time; time.sleep(0.3); print('torch.OutOfMemoryError: CUDA out of memory'); sys.exit(3)"
    monkeypatch.setattr(tensor_parallel, "start", lambda spec, log: _followers(tmp_path, fail))
    previous = signal.signal(signal.SIGINT, lambda *_: None)  # e.g. a worker's stop handler left behind
    try:
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="rank 1 failed"):
            tensor_parallel.run_with_followers(_spec(3), _waits_in_a_collective, log=lambda _m: None)
        assert time.monotonic() - started < 10
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # the caller's handler is back
    finally:
        signal.signal(signal.SIGINT, previous)
