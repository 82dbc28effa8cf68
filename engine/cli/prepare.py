"""``python -m engine prepare``: convert the demo model once, create the database and measure this machine's
CPU once for the estimates (``make run`` calls it, so the Launch page's first estimate has a time)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_OK, open_db

if TYPE_CHECKING:
    from engine.cli.common import Subparsers


def cmd_prepare(args: argparse.Namespace) -> int:
    """Convert the demo model once, prepare the database and measure the CPU once; print the converted folder."""
    from engine.weights.models import demo_gguf_path, gguf_to_hf_folder
    from engine.whatif.microbench import measure_once

    db = open_db(args)
    folder = gguf_to_hf_folder(demo_gguf_path(), lambda msg, _f: print(msg, file=sys.stderr, flush=True))
    if not args.no_calibrate:
        try:
            measure_once(db, "cpu", log=lambda msg: print(msg, file=sys.stderr, flush=True))
        except (RuntimeError, ValueError, OSError) as exc:  # the estimates then say "time unknown", as before
            print(f"could not measure this machine ({exc}); estimates stay without a time", file=sys.stderr)
    print(folder)
    return EXIT_OK


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``prepare`` verb."""
    p = subparsers.add_parser("prepare", parents=[common], help="convert the demo model and create the database")
    p.add_argument("--no-calibrate", action="store_true", help="do not measure this machine's CPU (a few seconds)")
    p.set_defaults(func=cmd_prepare)
