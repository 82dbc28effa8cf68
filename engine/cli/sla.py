"""``python -m engine sla``: the highest request rate (or concurrency) a serving recipe sustains under an SLO.

Examples::

    python -m engine sla --model demo --engine vllm-server --device cpu --slo chat --goodput 0.99 \\
        --axis rate --start 1 --resolution 0.25 --max-probes 8 --name demo-chat --wait
    python -m engine sla status demo-chat --json
    python -m engine sla stop demo-chat

Each probe is a job the worker runs (``python -m engine worker``), stored as a run in the
sweep ``sla:<name>``; the workers advance the search (:mod:`engine.optimize.sla`), and
``--wait`` advances it too while it prints each probe's verdict, until the answer.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from engine.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_spec_arguments,
    emit_json,
    finite_float,
    open_db,
    positive_int,
    spec_from_args,
    stderr_log,
)
from engine.settings import cli_actor

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.optimize.sla import SlaDefinition
    from engine.spec import JobSpec
    from storage import Database
    from storage.sla import SlaSearch

POLL_S = 2.0


def _definition(args: argparse.Namespace, spec: JobSpec) -> SlaDefinition:
    from engine.optimize.sla import new_definition
    from engine.optimize.slo import parse_slo

    try:
        slo_name, bounds = parse_slo(args.slo or "")
    except ValueError as exc:
        raise UsageError(f"--slo: {exc}") from exc
    if args.goodput is not None and not 0 < args.goodput <= 1:
        raise UsageError("--goodput is a share of requests, 0 < G <= 1 (e.g. 0.99)")
    fields = {
        "axis": args.axis,
        "goodput": args.goodput,
        "start": args.start,
        "resolution": args.resolution if args.resolution is not None else (1.0 if args.axis == "concurrency" else 0.25),
        "max_probes": args.max_probes,
        "timeout_s": args.timeout,
    }
    return new_definition(spec, slo_name, bounds, **{k: v for k, v in fields.items() if v is not None})


def cmd_start(args: argparse.Namespace) -> int:
    """Check the input, store the search, queue its first probe; with ``--wait``, follow it to the answer."""
    from engine.jobs.submission import check_submittable, served_devices
    from engine.optimize import sla

    if args.search_name:
        raise UsageError(f"unexpected {args.search_name!r}; name a new search with --name")
    spec = spec_from_args(args)
    definition = _definition(args, spec)
    db = open_db(args)
    db.check_writable()
    for load in (definition.start, definition.start * 2):  # the first probe, and the next if it passes
        check_submittable(db, sla.probe_spec(definition, load, "check"))
    name = args.name or f"{spec.recipe.engine}-{definition.axis}-{time.strftime('%Y%m%d-%H%M%S')}"
    search = sla.start(db, name, definition, submitted_by=cli_actor())
    stderr_log(f"sla search {name}: {definition.goal()}; probes in sweep {sla.sweep_name(name)}")
    if spec.device not in served_devices(db):
        stderr_log(f"no live worker serves {spec.device} yet: python -m engine worker --devices {spec.device}")
    if args.wait:
        search = _follow(db, search.id)
    return _print(args, search)


def _follow(db: Database, search_id: int) -> SlaSearch:
    """Advance the search until it ends, printing each change on stderr."""
    from engine.optimize import sla

    search, shown = sla.advance(db, search_id), None
    while True:
        line = sla.progress_line(search)
        if line != shown:
            stderr_log(f"[{search.name}] {line}")
            shown = line
        if search.is_final:
            return search
        time.sleep(POLL_S)
        search = sla.advance(db, search_id)


def _print(args: argparse.Namespace, search: SlaSearch) -> int:
    from engine.optimize import sla

    if args.json:
        emit_json(sla.report(search))
    else:
        _print_table(search)
    return EXIT_FAILED if search.status == "failed" else EXIT_OK


def _print_table(search: SlaSearch) -> None:
    from engine.optimize import sla

    print(f"sla search {search.name} ({search.status}): {sla.report(search)['goal']}")
    print(f"{'probe':>5}{'load':>10}{'run':>6}  {'verdict':<8}{'goodput':>9}  reasons")
    for i, p in enumerate(search.probes, 1):
        good = (p.get("values") or {}).get("goodput_fraction")
        good_text = "-" if good is None else f"{good:.1%}"
        print(
            f"{i:>5}{p['load']:>10g}{p.get('run_id') or '-':>6}  {p['status']:<8}{good_text:>9}  "
            + "; ".join(p.get("reasons") or [])
        )
    if search.answer:
        print(f"answer: {search.answer['text']}")
        if sla.boundary_words(search.answer):
            print(f"boundary probes: {sla.boundary_words(search.answer)}")
    if search.error:
        print(f"error: {search.error}")


def _stored(args: argparse.Namespace) -> tuple[Database, SlaSearch]:
    from storage import sla as store

    if not args.search_name:
        raise UsageError(f"sla {args.action} needs the search's name, e.g. python -m engine sla {args.action} NAME")
    db = open_db(args)
    search = (store.stop if args.action == "stop" else store.find)(db, args.search_name)
    if search is None:
        raise UsageError(f"no SLA search named {args.search_name!r}")
    return db, search


def cmd_sla(args: argparse.Namespace) -> int:
    """``sla`` (start), ``sla status NAME`` or ``sla stop NAME``."""
    if args.action == "start":
        return cmd_start(args)
    db, search = _stored(args)
    if args.wait and not search.is_final:
        search = _follow(db, search.id)
    return _print(args, search)


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``sla`` verb."""
    p = subparsers.add_parser(
        "sla",
        parents=[common, as_json],
        help="the highest request rate (or concurrency) a serving recipe sustains under an SLO",
    )
    p.add_argument("action", nargs="?", choices=("start", "status", "stop"), default="start")
    p.add_argument("search_name", nargs="?", metavar="NAME", help="status/stop: the search's name")
    add_spec_arguments(p)
    g = p.add_argument_group("SLA search")
    g.add_argument(
        "--slo", help="chat | mlperf-llama2-70b | e.g. ttft_ms_p99=300,tpot_ms_p99=50 (also itl_ms_, e2el_ms_)"
    )
    g.add_argument("--goodput", type=finite_float, default=0.99, help="share of requests meeting the SLO (0.99)")
    g.add_argument("--axis", choices=("rate", "concurrency"), default="rate", help="what is searched (rate)")
    g.add_argument("--start", type=finite_float, default=1.0, help="the first load probed (1)")
    g.add_argument("--resolution", type=finite_float, help="stop when the bracket is this narrow (0.25; 1)")
    g.add_argument("--max-probes", type=positive_int, default=8, help="most probes (8)")
    g.add_argument("--timeout", type=finite_float, help="seconds per probe job (3600)")
    g.add_argument("--wait", action="store_true", help="follow the search until its answer")
    p.set_defaults(func=cmd_sla)
