"""``python -m engine prepare``: convert the demo model once and create the database (``make run`` calls it)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.cli.common import EXIT_OK, open_db


def cmd_prepare(args: argparse.Namespace) -> int:
    """Convert the demo model once and prepare the database; print the converted folder."""
    from engine.weights.models import demo_gguf_path, gguf_to_hf_folder

    open_db(args)
    folder = gguf_to_hf_folder(demo_gguf_path(), lambda msg, _f: print(msg, file=sys.stderr, flush=True))
    print(folder)
    return EXIT_OK


def register(subparsers: Any, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``prepare`` verb."""
    p = subparsers.add_parser("prepare", parents=[common], help="convert the demo model and create the database")
    p.set_defaults(func=cmd_prepare)
