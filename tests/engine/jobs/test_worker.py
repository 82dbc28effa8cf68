"""The worker end to end: real demo-model jobs in their own processes, crashes, cancel,
timeout, and recovery after the worker itself is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.jobs.worker import failure_outcome, read_tail, signal_reason
from engine.spec import parse_job_spec
from storage import jobs

REPO = Path(__file__).resolve().parents[3]
TINY = {"prompt_tokens": 16, "output_tokens": 4, "requests": 2}
LONG = {"prompt_tokens": 16, "output_tokens": 64, "requests": 64}


def _spec(workload: dict, name: str | None = None):
    return parse_job_spec({"model": {"source": "demo"}, "workload": workload, "name": name})


def wait_for(predicate, timeout: float = 90.0, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout} s")


def start_worker(db_url: str, tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, LATENCYLAB_DATA_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    log = open(tmp_path / f"worker-{time.monotonic_ns()}.log", "wb")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine",
            "worker",
            "--db",
            db_url,
            "--devices",
            "cpu",
            "--grace",
            "2",
            "--stale-after",
            "5",
            *extra,
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def job_pids(job_id: int) -> list[int]:
    """Live processes running this job (found by command line)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if b"engine.jobs.job_process" in cmd and str(job_id).encode() in cmd and state != "Z":
            out.append(int(entry.name))
    return out


def _status(db, job_id):
    return jobs.get_job(db, job_id).status


def test_reasons_are_one_line():
    assert signal_reason(-9) == "killed by signal 9 (SIGKILL)"
    assert failure_outcome(-9, None, "").startswith("killed by signal 9")
    assert failure_outcome(1, "ValueError: bad", "x\n") == "ValueError: bad"
    assert failure_outcome(1, None, "a\nRuntimeError: boom\n") == "RuntimeError: boom"
    assert failure_outcome(1, None, "torch.OutOfMemoryError: CUDA out of memory. Tried").startswith(
        "CUDA out of memory"
    )


def test_read_tail(tmp_path):
    p = tmp_path / "log"
    p.write_text("".join(f"line {i}\n" for i in range(5000)))
    tail = read_tail(p, 100)
    assert tail.endswith("line 4999\n") and tail.startswith("line ")
    assert read_tail(tmp_path / "missing") == ""


@pytest.mark.slow
@pytest.mark.alone
def test_demo_job_completes_with_progress_and_log(db, db_url, tmp_path, demo_folder):
    job_id = jobs.submit(db, _spec(TINY, "tiny"), timeout_s=300)
    proc = start_worker(db_url, tmp_path, "--once")
    assert proc.wait(timeout=150) == 0
    job = jobs.get_job(db, job_id)
    assert job.status == "done", job.error
    assert job.run_id is not None and job.progress == 1.0
    assert "done: run" in job.log_tail and (tmp_path / "logs" / f"job-{job_id}.log").is_file()
    from storage.runs import get_run

    run = get_run(db, job.run_id)
    assert run.status == "done" and run.job_id == job_id


@pytest.mark.slow
@pytest.mark.alone
def test_killed_runner_fails_with_reason_and_worker_takes_next(db, db_url, tmp_path, demo_folder):
    victim = jobs.submit(db, _spec(LONG), timeout_s=300)
    nxt = jobs.submit(db, _spec(TINY), timeout_s=300)
    worker = start_worker(db_url, tmp_path)
    try:
        wait_for(lambda: jobs.get_job(db, victim).phase in ("loading", "warm-up", "measuring"))
        for pid in job_pids(victim):
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: _status(db, victim) == "failed")
        assert jobs.get_job(db, victim).error.startswith("killed by signal 9")
        wait_for(lambda: _status(db, nxt) in ("done", "failed"), timeout=120)
        assert _status(db, nxt) == "done", jobs.get_job(db, nxt).error
        assert worker.poll() is None  # the worker lives on
        from storage.runs import get_requests, list_runs

        # issue 13 item 13: one failed run with the reason, linked to the job (no half-written one)
        [run] = [r for r in list_runs(db) if r.job_id == victim]
        assert run.status == "failed" and run.error.startswith("killed by signal 9")
        assert jobs.get_job(db, victim).run_id == run.id and get_requests(db, run.id) == []
    finally:
        stop(worker)


@pytest.mark.slow
@pytest.mark.alone
def test_cancel_running_and_timeout(db, db_url, tmp_path, demo_folder):
    cancelled = jobs.submit(db, _spec(LONG), timeout_s=300)
    timed = jobs.submit(db, _spec(LONG), timeout_s=3)
    worker = start_worker(db_url, tmp_path)
    try:
        wait_for(lambda: _status(db, cancelled) == "running" and jobs.get_job(db, cancelled).started_at)
        jobs.cancel(db, cancelled)
        wait_for(lambda: _status(db, cancelled) == "cancelled", timeout=30)
        assert not job_pids(cancelled)
        wait_for(lambda: _status(db, timed) == "failed", timeout=60)
        assert jobs.get_job(db, timed).error == "timed out after 3 s"
        assert not job_pids(timed)
        from storage.runs import get_run, list_runs

        assert get_run(db, jobs.get_job(db, timed).run_id).error == "timed out after 3 s"
        assert not [r for r in list_runs(db) if r.job_id == cancelled]  # a cancel is not a failed run
    finally:
        stop(worker)


@pytest.mark.slow
@pytest.mark.alone
def test_killed_worker_job_is_recovered(db, db_url, tmp_path, demo_folder):
    job_id = jobs.submit(db, _spec(TINY), timeout_s=300)
    worker = start_worker(db_url, tmp_path)
    wait_for(lambda: jobs.get_job(db, job_id).phase in ("starting", "loading"))
    assert not jobs.get_job(db, job_id).measuring_started
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    # the orphaned job process notices its worker is gone and stops itself
    wait_for(lambda: not job_pids(job_id), timeout=15)
    assert _status(db, job_id) == "running"  # left in limbo until someone recovers it
    second = start_worker(db_url, tmp_path, "--once")
    assert second.wait(timeout=150) == 0
    job = jobs.get_job(db, job_id)
    assert job.status == "done", job.error
    assert job.attempts == 2


@pytest.mark.slow
@pytest.mark.alone
def test_sigterm_gives_running_job_back(db, db_url, tmp_path, demo_folder):
    job_id = jobs.submit(db, _spec(LONG), timeout_s=300)
    worker = start_worker(db_url, tmp_path)
    wait_for(lambda: jobs.get_job(db, job_id).started_at is not None)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    job = jobs.get_job(db, job_id)
    assert job.status == "queued" and job.attempts == 0
    assert not job_pids(job_id)
    [w] = jobs.list_workers(db)
    assert w.stopped


@pytest.mark.slow
@pytest.mark.alone
def test_a_stopped_worker_past_the_stale_timeout_gets_one_outcome(db, db_url, tmp_path, demo_folder):
    """Issue 13 item 14: SIGSTOP a worker past --stale-after while another runs; SIGCONT it."""
    from storage.runs import list_runs

    job_id = jobs.submit(db, _spec(LONG), timeout_s=300)
    first = start_worker(db_url, tmp_path, "--stale-after", "3")
    second = None
    try:
        wait_for(lambda: jobs.get_job(db, job_id).measuring_started)
        first.send_signal(signal.SIGSTOP)
        second = start_worker(db_url, tmp_path, "--stale-after", "3")
        wait_for(lambda: _status(db, job_id) != "running", timeout=60)
        first.send_signal(signal.SIGCONT)
        wait_for(lambda: not job_pids(job_id), timeout=30)
        time.sleep(1.5)  # the resumed worker's next rounds: it must not flip the outcome
        job = jobs.get_job(db, job_id)
        assert job.status == "failed" and job.error == jobs.WORKER_LOST
        [run] = [r for r in list_runs(db) if r.job_id == job_id]  # one run, no orphan done run
        assert run.status == "failed" and run.error == jobs.WORKER_LOST and job.run_id == run.id
    finally:
        first.send_signal(signal.SIGCONT)
        stop(first)
        if second is not None:
            stop(second)
    log = b"".join(p.read_bytes() for p in tmp_path.glob("worker-*.log")).decode()
    assert f"job {job_id} done" not in log
    assert f"job {job_id} was ended without this worker" in log


def test_ticks_run_with_the_database_and_their_lines_are_logged(db_url, tmp_path, capsys):
    """``Worker(ticks=...)``: what ``python -m engine worker`` uses to advance recipe studies."""
    from engine.jobs.worker import Worker

    seen = []
    worker = Worker(db_url, ["cpu"], log_dir=tmp_path, ticks=[lambda db: seen.append(db) or ["study s: tick"]])
    assert worker.step() is True
    worker.step()  # within TICK_S of the first: not run again
    assert seen == [worker.db]
    assert "study s: tick" in capsys.readouterr().err
