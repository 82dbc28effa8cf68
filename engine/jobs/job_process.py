"""The process one job runs in: ``python -m engine.jobs.job_process --job ID --db URL ...``.

The worker spawns it in its own process group with ``CUDA_VISIBLE_DEVICES`` pinned and
its stdout/stderr going to the job's log file. It loads the job's spec from the
database, runs :func:`engine.run.runner.run_benchmark`, and a ticker thread writes the
live :class:`~engine.run.runner.ProgressState` to the job at most every ~0.5 s (the first
write happens before anything heavy is imported). Exit codes: 0 done, 1 failed (the
reason is stored on the job), 3 the spec cannot run, 4 the job was taken away before
its result could be stored (recovered by another worker while this one was stopped):
the run is stored only while this job's worker still holds it, so nothing was stored.

A done point of a sweep that stops at saturation then ends the sweep's higher queued loads when
its run was saturated (:mod:`engine.jobs.saturation_stop`), before the process exits.

If its worker dies (the parent process changes) or the job is taken away from it
(cancelled, or recovered by another worker), the process kills its own group.
A failure prints one line on stderr and stores it as the job's reason; a traceback, when
there is one, goes to stdout, the job's log.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping
    from engine.run.runner import BenchmarkResult, ProgressState
    from storage import Database
    from storage.jobs import JobInfo

EXIT_DONE, EXIT_FAILED, EXIT_SPEC, EXIT_LOST = 0, 1, 3, 4
TICK_S = 0.5

# Share of the whole job each phase covers (start, width), for one progress bar.
_PHASE_SPAN: dict[str, tuple[float, float]] = {
    "starting": (0.0, 0.0),
    "loading": (0.02, 0.08),
    "warm-up": (0.10, 0.10),
    "measuring": (0.20, 0.75),
    "profiling": (0.95, 0.0),  # the profile phase (engine/run/profile.py), after measuring
    "evaluating": (0.95, 0.04),
    "saving": (0.99, 0.0),
    "done": (1.0, 0.0),
}


def overall_fraction(phase: str, phase_fraction: float | None) -> float:
    """The whole job's progress from its phase and the phase's own fraction."""
    start, width = _PHASE_SPAN.get(phase, (0.0, 0.0))
    return min(1.0, start + width * (phase_fraction or 0.0))


def estimate_eta(state: ProgressState, measured_tokens: int, now: float) -> float | None:
    """Seconds left, from the token rate of the current phase (warm-up or measuring)."""
    if state.phase not in ("warm-up", "measuring") or state.tokens_done <= 0:
        return None
    elapsed = now - state.phase_started
    if elapsed <= 0:
        return None
    rate = state.tokens_done / elapsed
    left = max(0, state.tokens_total - state.tokens_done)
    if state.phase == "warm-up":
        left += measured_tokens
    return left / rate


class Ticker(threading.Thread):
    """Writes progress to the job every TICK_S seconds; kills the group when orphaned."""

    def __init__(self, db: Database, job_id: int, parent_pid: int | None, measured_tokens: int) -> None:
        super().__init__(name="progress-ticker", daemon=True)
        self.db, self.job_id, self.parent_pid = db, job_id, parent_pid
        self.measured_tokens = measured_tokens
        self.state: ProgressState | None = None
        self.stop = threading.Event()
        self.measuring = False

    def write(self) -> None:
        from storage import jobs

        state = self.state
        if state is None:
            still_ours = jobs.progress(self.db, self.job_id, phase="starting", fraction=0.0, note="starting")
        else:
            if state.phase == "measuring":
                self.measuring = True
            still_ours = jobs.progress(
                self.db,
                self.job_id,
                phase=state.phase,
                fraction=overall_fraction(state.phase, state.fraction),
                note=state.note,
                eta_s=estimate_eta(state, self.measured_tokens, time.monotonic()),
                measuring_started=self.measuring,
            )
        if not still_ours:
            _die("the job is no longer running here (cancelled or recovered); stopping")

    def run(self) -> None:
        while not self.stop.wait(TICK_S):
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                _die("the worker that started this job is gone; stopping")
            try:
                self.write()
            except Exception as exc:  # noqa: BLE001 - a missed tick is not fatal
                print(f"progress update failed: {exc}", file=sys.stderr, flush=True)


def _die(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one job; see the module docstring for exit codes."""
    parser = argparse.ArgumentParser(prog="python -m engine.jobs.job_process")
    parser.add_argument("--job", type=int, required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--parent-pid", type=int, default=None)
    args = parser.parse_args(argv)

    from engine.secrets import ScrubbedStream, register_spec
    from storage import jobs, open_database

    sys.stdout, sys.stderr = ScrubbedStream(sys.stdout), ScrubbedStream(sys.stderr)  # the job's log
    db = open_database(args.db)
    job = jobs.get_job(db, args.job)
    if job is None or job.status != jobs.RUNNING:
        print(f"job {args.job} is not running; nothing to do", file=sys.stderr)
        return EXIT_SPEC
    register_spec(job.spec)  # its API key never reaches the log, the job or the run
    wl = job.spec.get("workload") or {}  # requests and output_tokens: the workload's own fields in any shape
    ticker = Ticker(db, args.job, args.parent_pid, int(wl.get("requests") or 0) * int(wl.get("output_tokens") or 0))
    ticker.write()  # the first progress update, before torch or the model load
    ticker.start()
    print(
        f"job {job.id} on {job.device} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r})",
        flush=True,
    )

    return _run(db, job, ticker)


def _run(db: Database, job: JobInfo, ticker: Ticker) -> int:
    """Run the job's benchmark and report its outcome on the job; the exit code."""
    from engine.run import runner
    from engine.spec import SpecError, parse_job_spec
    from storage import ClaimLost, jobs

    state = runner.ProgressState()
    ticker.state = state

    def log(msg: str) -> None:
        print(msg, flush=True)

    try:
        from engine.jobs.ray_load import load_launcher

        spec = parse_job_spec(job.spec_json)
        result = runner.run_benchmark(
            spec, db, state, log, job_id=job.id, sweep=job.sweep, worker_id=job.worker_id, launcher=load_launcher(spec)
        )
    except ClaimLost as exc:  # recovered or ended elsewhere meanwhile: its outcome stands, ours is dropped
        print(f"result dropped: {exc}", file=sys.stderr, flush=True)
        return EXIT_LOST
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        jobs.set_result(db, job.id, error=str(exc))
        return EXIT_SPEC
    except runner.BenchmarkFailed as exc:
        print(f"failed: {exc.reason}", file=sys.stderr, flush=True)
        jobs.set_result(db, job.id, run_id=exc.run_id, error=exc.reason)
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - unexpected: the traceback to the log, one line as the reason
        reason = runner.failure_reason(exc)
        log(traceback.format_exc())
        print(f"failed: {reason}", file=sys.stderr, flush=True)
        jobs.set_result(db, job.id, error=reason)
        return EXIT_FAILED
    finally:
        ticker.stop.set()
    try:
        ticker.write()
    except Exception:  # noqa: BLE001 - best effort
        pass
    jobs.set_result(db, job.id, run_id=result.run_id)
    _stop_at_saturation(db, job, result, log)
    print(done_line(result.run_id, result.metrics), flush=True)
    return EXIT_DONE


def done_line(run_id: int | None, metrics: JSONMapping | None) -> str:
    """``done: run 7; TTFT p50 322.9 ms, 24.7 tok/s``: the figures in their registry units, not raw floats."""
    from engine.measure import registry

    figures = registry.figures(metrics or {})
    named = (("ttft_ms_p50", "TTFT p50 "), ("tpot_ms_p50", "TPOT p50 "), ("output_tokens_per_s", ""))
    parts = [
        f"{word}{registry.lookup(key).format(figures[key])}" for key, word in named if figures.get(key) is not None
    ]
    return f"done: run {run_id}; " + (", ".join(parts) or "no figures")


def _stop_at_saturation(db: Database, job: JobInfo, result: BenchmarkResult, log: Callable[[str], None]) -> None:
    """A saturated point of a sweep that stops at saturation ends its higher loads' queued jobs
    (engine/jobs/saturation_stop.py); a stop that fails leaves the sweep running, the job done."""
    from engine.jobs.saturation_stop import after_job_run

    try:
        after_job_run(db, job, result, log)
    except Exception as exc:  # noqa: BLE001 - the run is stored; only the stop is lost, with its reason
        print(f"the sweep's saturation stop failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
