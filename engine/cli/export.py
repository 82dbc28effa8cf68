"""``python -m engine export``: stored runs as an HTML report, a CSV table or JSON with raw stamps."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_OK, UsageError, int_arg, metric_key, open_db, parse_id

if TYPE_CHECKING:
    import pandas as pd

    from engine.cli.common import Subparsers
    from storage import Database

FORMATS: tuple[str, ...] = ("html", "csv", "json")
MAX_COMPARE = 8


def parse_ids(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]`` (order kept, duplicates dropped); UsageError on a bad part."""
    ids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        run_id = parse_id(part, "--runs: run id", "give ids like 1,2,3")
        if run_id not in ids:
            ids.append(run_id)
    if not ids:
        raise UsageError("--runs: no run ids given; give ids like 1,2,3 or use --all")
    return ids


def cmd_export(args: argparse.Namespace) -> int:
    """Write the export to ``-o FILE`` or stdout."""
    from storage.frames import runs_frame

    if bool(args.runs) == bool(args.all):
        raise UsageError("give exactly one of --runs 1,2,3 or --all")
    wanted = parse_ids(args.runs) if args.runs else []
    db = open_db(args)
    if args.all:
        frame = runs_frame(db)
        ids = [int(i) for i in frame["run_id"]] if not frame.empty else []
        if not ids:
            raise UsageError(f"no runs stored in {db.url}; nothing to export")
        ids.reverse()  # oldest first
    else:
        ids, frame = wanted, None
    if args.baseline is not None and args.baseline not in ids:
        raise UsageError(f"--baseline {args.baseline} is not one of the exported runs")
    text = _render(args, db, ids, frame)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc}") from exc
        print(f"wrote {args.format} export of {len(ids)} runs to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _render(args: argparse.Namespace, db: Database, ids: list[int], frame: pd.DataFrame | None) -> str:
    from engine.report import export
    from engine.settings import get_settings
    from storage.frames import runs_frame

    base = get_settings().public_base_url
    comparing = not args.all and len(ids) <= MAX_COMPARE
    if args.format == "html" and not comparing:
        frame = runs_frame(db) if frame is None else frame
        frame = frame[frame["run_id"].isin(ids)]
        for option, column in (("--x", args.x), ("--y", args.y), ("--color", args.color), ("--symbol", args.symbol)):
            if column and column not in frame.columns:
                raise UsageError(
                    f"{option} {column!r} is not a column of the runs; try tpot_ms_p50, "
                    "output_tokens_per_s, quality.perplexity or recipe.dtype"
                )
        link = export.permalink(base, "explore", {"x": args.x, "y": args.y})
        return _explore_report(db, frame, args, link)
    runs, missing = export.load_runs(db, ids)
    if missing:
        raise UsageError(f"no run {', '.join(map(str, missing))} in {db.url}; list runs with: python -m engine runs")
    if args.format == "json":
        return export.runs_json(runs, export.load_requests(db, ids))
    if args.format == "csv":
        if comparing:
            return export.comparison_csv(runs, args.baseline, export.load_requests(db, ids))
        frame = runs_frame(db) if frame is None else frame
        return export.table_csv(frame[frame["run_id"].isin(ids)])
    params: dict[str, str | int] = {"runs": ",".join(map(str, ids))}
    if args.baseline:
        params["baseline"] = args.baseline
    link = export.permalink(base, "compare", params)
    return export.comparison_html(runs, export.load_requests(db, ids), args.baseline, link=link)


def _explore_report(db: Database, frame: pd.DataFrame, args: argparse.Namespace, link: str) -> str:
    """The Explore report with each run's stored intervals and records: the verdicts the page gives."""
    from engine.report import export
    from engine.report.fronts import with_intervals
    from storage.frames import figure_records

    records = figure_records(db, [int(i) for i in frame["run_id"]])
    frame = with_intervals(frame, [args.x, args.y], records)
    return export.explore_html(frame, args.x, args.y, args.color, args.symbol, link=link, records=records)


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``export`` verb."""
    p = subparsers.add_parser(
        "export",
        parents=[common],
        help="export runs: HTML report, CSV table or JSON with raw stamps",
        description="HTML: up to 8 runs -> a comparison report; --all or more runs -> an Explore report. "
        "CSV: the comparison table (up to 8 runs) or one row per run. JSON: runs with raw stamps.",
    )
    p.add_argument("--runs", help="comma-separated run ids, e.g. 1,2,3")
    p.add_argument("--all", action="store_true", help="every stored run")
    p.add_argument("--format", choices=FORMATS, default="html")
    p.add_argument("--baseline", type=int_arg, help="baseline run id for comparisons (default: the first)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--x", type=metric_key, default="tpot_ms_p50", help="Explore report x axis (default tpot_ms_p50)")
    p.add_argument(
        "--y",
        type=metric_key,
        default="output_tokens_per_s",
        help="Explore report y axis (default output_tokens_per_s)",
    )
    p.add_argument("--color", default="engine", help="Explore report colour column (default engine)")
    p.add_argument("--symbol", default=None, help="Explore report symbol column")
    p.set_defaults(func=cmd_export)
