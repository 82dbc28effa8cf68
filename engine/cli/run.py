"""``python -m engine run``: one benchmark now, in this process, stored like any other run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.cli.common import EXIT_FAILED, EXIT_OK, add_spec_arguments, emit_json, open_db, spec_from_args, stderr_log


def cmd_run(args: argparse.Namespace) -> int:
    """Run the spec of the options; a run that fails after it started is stored as failed (exit 1)."""
    from engine.report.results import render_table, result_object
    from engine.run import runner
    from storage.runs import get_run

    spec = spec_from_args(args)
    runner.preflight(spec)
    db = open_db(args)
    try:
        result = runner.run_benchmark(spec, db=db, log=stderr_log)
    except runner.BenchmarkFailed as exc:
        print(f"run {exc.run_id} failed: {exc.reason}", file=sys.stderr)
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


def register(subparsers: Any, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``run`` verb."""
    p = subparsers.add_parser("run", parents=[common, as_json], help="run one benchmark now and store it")
    add_spec_arguments(p)
    p.set_defaults(func=cmd_run)
