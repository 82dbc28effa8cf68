"""``python -m engine run``: one benchmark now, in this process, stored like any other run.

A run that fails after it started prints one line on stderr; its traceback goes to
``<data_dir>/logs/run-<id>.log`` (and to stderr as well with ``--verbose``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_FAILED, EXIT_OK, add_spec_arguments, emit_json, open_db, spec_from_args, stderr_log

if TYPE_CHECKING:
    from engine.cli.common import Subparsers

TRACEBACK_HEAD = "Traceback (most recent call last)"


class RunLog:
    """The progress log of a run: lines on stderr, tracebacks held for the run's log file."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.tracebacks: list[str] = []

    def __call__(self, msg: str) -> None:
        if msg.lstrip().startswith(TRACEBACK_HEAD):
            self.tracebacks.append(msg)
            if not self.verbose:
                return
        stderr_log(msg)

    def save(self, run_id: int | None) -> Path | None:
        """Write the held tracebacks to the run's log file; its path, or None when there were none."""
        from engine.settings import get_settings

        if not self.tracebacks:
            return None
        path = get_settings().data_dir / "logs" / f"run-{run_id if run_id is not None else 'unsaved'}.log"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write("\n".join(self.tracebacks) + "\n")
        except OSError:
            return None
        return path


def cmd_run(args: argparse.Namespace) -> int:
    """Run the spec of the options; a run that fails after it started is stored as failed (exit 1)."""
    from engine.report.results import render_table, result_object
    from engine.run import runner
    from storage.runs import get_run

    spec = spec_from_args(args)
    traffic = runner.preflight(spec)
    db = open_db(args)
    db.check_writable()  # a read-only database fails now, not after the whole benchmark ran
    print(traffic.words(spec.workload.traffic), file=sys.stderr)  # the schedule up front, once all is checked
    log = RunLog(args.verbose)
    try:
        from engine.jobs.ray_load import load_launcher

        result = runner.run_benchmark(spec, db=db, log=log, launcher=load_launcher(spec))
    except runner.BenchmarkFailed as exc:
        path = log.save(exc.run_id)
        where = f" (traceback in {path}; --verbose prints it)" if path and not args.verbose else ""
        print(f"run {exc.run_id} failed: {exc.reason}{where}", file=sys.stderr)
        if args.json and exc.run_id is not None:
            emit_json(result_object(get_run(db, exc.run_id)))
        return EXIT_FAILED
    obj = result_object(get_run(db, result.run_id))
    if args.json:
        emit_json(obj)
    else:
        print(render_table(obj))
        print(f"\nstored as run {result.run_id}  (python -m engine show {result.run_id})")
    return EXIT_OK


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``run`` verb."""
    p = subparsers.add_parser("run", parents=[common, as_json], help="run one benchmark now and store it")
    add_spec_arguments(p)
    p.set_defaults(func=cmd_run)
