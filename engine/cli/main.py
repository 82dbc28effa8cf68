"""``python -m engine <verb>``: the one command-line entry.

Every verb takes ``--db URL`` (env ``LATENCYLAB_DB_URL``) and ``--json`` where it
prints results; with ``--json`` stdout holds exactly one JSON document and every log
line (the engine's, its child processes') goes to stderr. Bad input exits 2 with a
one-line message on stderr; a run that fails after it started is stored as failed and
exits 1. Each verb lives in its own module (``register(subparsers, common, as_json)``);
what they share is :mod:`engine.cli.common`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from engine.cli.common import EXIT_USAGE, Parser, UsageError, common_parent, json_parent, json_stdout
from engine.spec import SpecError

# Modules that add verbs, in the order of the help text: each has ``register(subparsers, common, as_json)``.
VERB_MODULES: list[str] = [
    "engine.cli.run",
    "engine.cli.runs",
    "engine.cli.prepare",
    "engine.cli.knobs",
    "engine.cli.export",
    "engine.cli.jobs",
    "engine.cli.estimate",
    "engine.cli.sweep",
    "engine.cli.suite",
]


def build_parser() -> argparse.ArgumentParser:
    """The parser of every verb."""
    parser = Parser(prog="python -m engine", description="LatencyLab: benchmark LLM inference recipes")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    common, as_json = common_parent(), json_parent()
    for module_name in VERB_MODULES:
        importlib.import_module(module_name).register(sub, common, as_json)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the verb; returns the exit code."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        func: Callable[[argparse.Namespace], int] = args.func
        if getattr(args, "json", False):
            with json_stdout():
                return func(args)
        return func(args)
    except (UsageError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
