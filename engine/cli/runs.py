"""``python -m engine runs`` and ``show``: the stored runs, as a table or JSON.

``runs`` lists measured runs; ``--predicted`` lists the serving simulator's predicted runs instead (marked
``predicted`` in JSON and the table), ``--all`` both."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from engine.cli.common import (
    EXIT_OK,
    UsageError,
    emit_json,
    listed_as_json_or_empty,
    open_db,
    parse_id,
    positive_int,
)

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.jsonvalue import JSONMapping, JSONObject, JSONValue
    from storage.runs import RunSummary


def _num(v: JSONValue, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _p50(metrics: JSONMapping, key: str) -> JSONValue:
    """The median of a figure of the stored metrics (``ttft_ms``), None when it has none."""
    figure = metrics.get(key) or {}
    return figure.get("p50") if isinstance(figure, dict) else None


def run_row(r: RunSummary) -> JSONObject:
    """One stored run as the flat object ``runs --json`` lists."""
    m = r.metrics or {}
    return {
        "run_id": r.id,
        "created_at": r.created_at.isoformat(),
        "status": r.status,
        "name": r.name,
        "model": r.model,
        "engine": r.engine,
        "device": r.device,
        "ttft_p50_ms": _p50(m, "ttft_ms"),
        "tpot_p50_ms": _p50(m, "tpot_ms"),
        "output_tokens_per_s": m.get("output_tokens_per_s"),
        "error": r.error,
        "predicted": bool(getattr(r, "predicted", False)),
    }


def cmd_runs(args: argparse.Namespace) -> int:
    """List the latest stored runs."""
    from storage.runs import list_runs

    db = open_db(args)
    which = None if args.all else bool(args.predicted)
    runs = list_runs(db, limit=args.limit, predicted=which)
    if listed_as_json_or_empty(args, runs, run_row, "no runs stored yet; try: python -m engine run --model demo"):
        return EXIT_OK
    print(
        f"{'id':>5}  {'created (UTC)':<19}  {'status':<7}{'model':<32}{'engine':<14}{'device':<8}"
        f"{'TTFT p50':>10}{'TPOT p50':>10}{'tok/s':>9}"
    )
    for r in runs:
        row = run_row(r)
        print(
            f"{r.id:>5}  {r.created_at:%Y-%m-%d %H:%M:%S}  {r.status:<7}{r.model[:31]:<32}{r.engine:<14}"
            f"{r.device:<8}{_num(row['ttft_p50_ms']):>10}{_num(row['tpot_p50_ms']):>10}"
            f"{_num(row['output_tokens_per_s'], 1):>9}{'  PREDICTED' if row['predicted'] else ''}"
        )
    return EXIT_OK


def parse_run_id(text: str) -> int:
    """A run id from the command line; UsageError with one line when it is not one."""
    return parse_id(text, "run id", "list runs with: python -m engine runs")


def cmd_show(args: argparse.Namespace) -> int:
    """Print one stored run: its table and spec, or its result object."""
    from engine.report.results import render_table, result_object
    from storage.runs import get_run

    run_id = parse_run_id(args.run_id)
    db = open_db(args)
    run = get_run(db, run_id)
    if run is None:
        raise UsageError(f"no run {run_id} in {db.url}; list runs with: python -m engine runs")
    obj = result_object(run)
    if args.json:
        emit_json(obj)
    else:
        print(render_table(obj))
        print("\nspec: " + json.dumps(run.spec, sort_keys=True))
    return EXIT_OK


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``runs`` and ``show`` verbs."""
    p = subparsers.add_parser("runs", parents=[common, as_json], help="list stored runs")
    p.add_argument("--limit", type=positive_int, default=50)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--predicted", action="store_true", help="list predicted runs (python -m engine simulate)")
    which.add_argument("--all", action="store_true", help="list measured and predicted runs")
    p.set_defaults(func=cmd_runs)
    p = subparsers.add_parser("show", parents=[common, as_json], help="print one stored run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_show)
