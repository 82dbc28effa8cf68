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
import traceback
from collections.abc import Callable, Sequence

from engine.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    Parser,
    UsageError,
    common_parent,
    json_parent,
    json_stdout,
    short_usage,
)
from engine.cli.values import one_line
from engine.spec import SpecError

# Modules that add verbs, in the order of the help text: each has ``register(subparsers, common, as_json)``,
# with the verbs it adds (a verb's own module is all a command needs: ``run`` starts without the others).
VERB_MODULES: dict[str, tuple[str, ...]] = {
    "engine.cli.run": ("run",),
    "engine.cli.runs": ("runs", "show"),
    "engine.cli.prepare": ("prepare",),
    "engine.cli.knobs": ("knobs",),
    "engine.cli.export": ("export",),
    "engine.cli.compare": ("compare",),
    "engine.cli.jobs": ("submit", "worker", "jobs", "cancel", "retry"),
    "engine.cli.estimate": ("estimate", "calibrate"),
    "engine.cli.sweep": ("sweep",),
    "engine.cli.suite": ("suite", "check"),
    "engine.cli.optimize": ("optimize",),
    "engine.cli.sla": ("sla",),
    "engine.cli.simulate": ("simulate",),
    "engine.cli.capacity": ("capacity",),
}


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb, or of ``verb`` alone (its module is the only one imported)."""
    parser = Parser(prog="python -m engine", description="LatencyLab: benchmark LLM inference recipes")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    common, as_json = common_parent(), json_parent()
    for module_name, verbs in VERB_MODULES.items():
        if verb is None or verb in verbs:
            importlib.import_module(module_name).register(sub, common, as_json)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the verb; returns the exit code.

    Whatever goes wrong ends in one line on stderr: bad input and database errors exit 2, an
    unexpected failure exits 1 (with ``--verbose`` database errors and unexpected failures
    print their traceback first).
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    known = {v for verbs in VERB_MODULES.values() for v in verbs}
    parser = build_parser(argv[0] if argv and argv[0] in known else None)
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            print(short_usage(parser), file=sys.stderr)  # not the 30 lines of every verb's help
            return EXIT_USAGE
        func: Callable[[argparse.Namespace], int] = args.func
        if getattr(args, "json", False):
            with json_stdout():
                return func(args)
        return func(args)
    except (UsageError, SpecError) as exc:  # bad input: the message is the whole story
        _say(f"error: {exc}", False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last net: one line, never a traceback
        from storage import StorageError  # lazily: verbs without a database do not import SQLAlchemy

        if isinstance(exc, StorageError):
            _say(f"error: {exc}", verbose)
            return EXIT_USAGE
        _say(f"error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose for the traceback)", verbose)
        return EXIT_FAILED


def _say(message: str, verbose: bool) -> None:
    """One line on stderr; with ``--verbose`` the traceback of the exception being handled first."""
    if verbose:
        traceback.print_exc(file=sys.stderr)
    print(one_line(message)[:2000], file=sys.stderr)
