"""Suite verbs: ``suite run``, ``suite list``, ``suite schedule`` and ``check``.

``suite run FILE|NAME [--tag TAG]`` queues every entry (the pre-flight of ``submit`` first:
one bad entry queues nothing). ``check --suite FILE|NAME --against TAG|RUN_ID`` compares
each entry's newest run with its baseline, prints a markdown table (for a CI job summary)
and exits 1 when a gate fails, 0 when every gate passes or is inconclusive.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_FAILED, EXIT_OK, UsageError, emit_json, open_db

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.jsonvalue import JSONObject
    from storage.suites import Schedule, StoredSuite


def cmd_suite_run(args: argparse.Namespace) -> int:
    from engine.jobs.submission import check_submittable
    from engine.jobs.suites import queue_suite, resolve_suite

    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    db = open_db(args)
    suite, _source = resolve_suite(db, args.suite)
    job_ids = queue_suite(db, suite, tag=args.tag, timeout_s=args.timeout or 3600.0, check=check_submittable)
    rows = [
        {"entry": e.name, "job_id": j, "fingerprint": e.spec.fingerprint()}
        for e, j in zip(suite.entries, job_ids, strict=True)
    ]
    if args.json:
        emit_json({"suite": suite.name, "tag": args.tag, "jobs": rows})
        return EXIT_OK
    for row in rows:
        print(f"{row['job_id']}\t{row['entry']}")
    tag = f" under tag {args.tag}" if args.tag else ""
    print(f"queued suite {suite.name}{tag}: {len(rows)} jobs (a worker runs them)", file=sys.stderr)
    return EXIT_OK


def _suite_row(s: StoredSuite, schedules: dict[str, Schedule]) -> JSONObject:
    sched = schedules.get(s.name)
    return {
        "name": s.name,
        "entries": [e.get("name") for e in s.body.get("entries", [])],
        "source": s.source,
        "tags": list(s.tags),
        "updated_at": s.updated_at.isoformat(),
        "schedule": None
        if sched is None
        else {
            "cron": sched.cron,
            "tag": sched.tag,
            "last_queued_at": sched.last_queued_at.isoformat() if sched.last_queued_at else None,
            "last_job_ids": list(sched.last_job_ids),
        },
    }


def cmd_suite_list(args: argparse.Namespace) -> int:
    from storage import suites as stored

    db = open_db(args)
    schedules = {s.suite: s for s in stored.list_schedules(db)}
    rows = [_suite_row(s, schedules) for s in stored.list_suites(db)]
    if args.json:
        emit_json(rows)
        return EXIT_OK
    if not rows:
        print("no suites stored yet; queue one with: python -m engine suite run suites/demo.yaml")
        return EXIT_OK
    print(f"{'suite':<20}{'entries':>8}  {'schedule (UTC)':<16}{'last queued':<22}tags")
    for r in rows:
        sched = r["schedule"] or {}
        last = (sched.get("last_queued_at") or "-")[:19]
        print(
            f"{r['name'][:19]:<20}{len(r['entries']):>8}  {sched.get('cron', '-'):<16}{last:<22}{', '.join(r['tags'][:5])}"
        )
    return EXIT_OK


def cmd_suite_schedule(args: argparse.Namespace) -> int:
    from engine.jobs.suites import next_due, resolve_suite, schedule_suite
    from storage import suites as stored

    db = open_db(args)
    if args.remove:
        suite, _ = resolve_suite(db, args.suite, store=False)
        if not stored.remove_schedule(db, suite.name):
            raise UsageError(f"suite {suite.name} has no schedule")
        print(f"schedule of suite {suite.name} removed")
        return EXIT_OK
    if not args.cron:
        raise UsageError("give --cron 'MIN HOUR DOM MON DOW' (e.g. '0 2 * * *'), or --remove")
    schedule = schedule_suite(db, args.suite, args.cron, tag=args.tag)
    print(
        f"suite {schedule.suite} scheduled '{schedule.cron}' (UTC); next due {next_due(schedule.cron):%Y-%m-%d %H:%M} "
        "UTC; a running worker queues it (python -m engine worker)"
    )
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from engine.jobs.suites import check_suite, resolve_suite
    from engine.report.gates import junit_xml, markdown, report_json

    db = open_db(args)
    suite, _ = resolve_suite(db, args.suite)
    report = check_suite(db, suite, args.against.strip())
    if args.junit:
        try:
            with open(args.junit, "w", encoding="utf-8") as fh:
                fh.write(junit_xml(report))
        except OSError as exc:
            raise UsageError(f"cannot write --junit {args.junit}: {exc.strerror or exc}") from exc
    if args.json:
        emit_json(report_json(report))
    else:
        sys.stdout.write(markdown(report))
    print(report.headline(), file=sys.stderr)
    return EXIT_OK if report.passed else EXIT_FAILED


def register(sub: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add ``suite`` (run, list, schedule) and ``check`` to ``python -m engine``."""
    from engine.cli.jobs import _guard

    p = sub.add_parser("suite", help="benchmark suites: queue, list, schedule")
    verbs = p.add_subparsers(dest="suite_verb", metavar="run|list|schedule", parser_class=type(p))
    q = verbs.add_parser("run", parents=[common, as_json], help="queue every entry of a suite as a job")
    q.add_argument("suite", metavar="FILE|NAME", help="a suite file (.yaml/.json) or a stored suite's name")
    q.add_argument("--tag", help="record the jobs under this tag, so a check can name them as its baseline")
    q.add_argument("--timeout", type=float, metavar="S", help="seconds before each job is stopped (default 3600)")
    q.set_defaults(func=_guard(cmd_suite_run))
    q = verbs.add_parser("list", parents=[common, as_json], help="stored suites, their tags and schedules")
    q.set_defaults(func=_guard(cmd_suite_list))
    q = verbs.add_parser("schedule", parents=[common], help="queue a suite on a cron schedule (a worker queues it)")
    q.add_argument("suite", metavar="NAME|FILE")
    q.add_argument("--cron", help="five cron fields in UTC, e.g. '0 2 * * *' (02:00 every day)")
    q.add_argument("--tag", help="record the scheduled jobs under this tag")
    q.add_argument("--remove", action="store_true", help="remove the suite's schedule")
    q.set_defaults(func=_guard(cmd_suite_schedule))

    p = sub.add_parser(
        "check",
        parents=[common, as_json],
        help="check a suite's newest runs against a baseline; exit 1 on a failed gate",
    )
    p.add_argument("--suite", required=True, metavar="FILE|NAME")
    p.add_argument(
        "--against", required=True, metavar="TAG|RUN_ID", help="the baseline: a tag of suite run, or a run id"
    )
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML (one test case per entry and gate)")
    p.set_defaults(func=_guard(cmd_check))
