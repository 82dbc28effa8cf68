"""``python -m engine optimize``: search the recipe space for the fastest recipe that keeps quality.

Create a study (every trial is a real job for the worker; ``--wait`` follows it to the end)::

    python -m engine optimize --name smol --model demo --device cpu --engine transformers \\
        --objective tpot_ms_p50 --max-ppl-increase-pct 2 --trials 10 \\
        --knobs dtype,quantization,drop_layers,speculative,attention --wait

and follow or steer it: ``optimize status NAME``, ``optimize list``, ``optimize wait NAME``,
``optimize pause|resume|stop NAME``. ``--json`` prints exactly one JSON document; bad input
exits 2 with one line and stores nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict, overload

from engine.cli.common import (
    EXIT_OK,
    UsageError,
    emit_json,
    finite_float,
    int_arg,
    open_db,
    positive_int,
    spec_from_args,
    stderr_log,
)
from engine.cli.jobs import _guard  # the job verbs' guard: storage errors and refused values exit 2
from engine.settings import cli_actor
from engine.spec import engines

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.jsonvalue import JSONObject
    from engine.optimize.study import StudyDefinition
    from engine.optimize.summary import FrontPoint
    from storage import Database
    from storage.studies import StudyInfo

ACTIONS = ("create", "status", "list", "wait", "pause", "resume", "stop")


class StatusDocument(TypedDict):
    """A study as ``optimize status --json`` prints it."""

    study: str
    status: str
    note: str | None
    objectives: list[str]
    created_at: str
    submitted_by: str | None
    best: str
    trials: list[JSONObject]
    front: list[FrontPoint]
    definition: JSONObject


@overload
def _pairs(items: list[str], what: str, many: Literal[True]) -> dict[str, tuple[str, ...]]: ...
@overload
def _pairs(items: list[str], what: str, many: Literal[False]) -> dict[str, str]: ...
def _pairs(items: list[str], what: str, many: bool) -> Mapping[str, tuple[str, ...] | str]:
    """``KNOB=A,B`` options as {knob: (A, B)} (``many``) or {knob: A}; UsageError naming a malformed one."""
    out: dict[str, tuple[str, ...] | str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"--{what} {item!r} is not NAME=VALUE{',VALUE' if many else ''}")
        parts = [v.strip() for v in value.split(",") if v.strip()]  # typed by the knob (engine.optimize.study)
        out[name.strip().replace("-", "_")] = tuple(parts) if many else parts[0]
    return out


def _slo(items: list[str]) -> dict[str, float]:
    out = {}
    for key, value in _pairs(items, "slo", False).items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--slo {key}={value!r}: the bound must be a number") from exc
    return out


def definition_from_args(args: argparse.Namespace) -> StudyDefinition:
    """The validated study definition of the create options; SpecError/UsageError with one line."""
    from engine.optimize.space import build_space, check_searchable
    from engine.optimize.study import parse_definition

    constraints = {
        "max_ppl_increase_pct": args.max_ppl_increase_pct,
        "max_kl_mean": args.max_kl_mean,
        "max_greedy_flip_rate": args.max_flips,
        "min_task_accuracy": args.min_task_accuracy,
        "slo": _slo(args.slo),
        "fit_memory": not args.no_fit_check,
    }
    budget = {"trials": args.budget_trials, "max_minutes": args.max_minutes, "parallel": args.parallel}
    data = {
        "name": args.study or f"study-{time.strftime('%Y%m%d-%H%M%S')}",
        "base": spec_from_args(args).model_dump(mode="json"),
        "objectives": [o.strip() for o in args.objective.split(",") if o.strip()],
        "constraints": {k: v for k, v in constraints.items() if v is not None},
        "budget": {k: v for k, v in budget.items() if v is not None},
        "sampler": args.sampler,
        "seed": args.seed,
        "knobs": args.knobs or "",
        "values": _pairs(args.values, "values", True),
        "exclude": _pairs(args.exclude, "exclude", True),
        "pin": _pairs(args.pin, "pin", False),
        "reuse": not args.no_reuse,
        "timeout_s": args.timeout,
    }
    definition = parse_definition(data)
    check_searchable(build_space(definition), definition.base.device)
    return definition


def status_document(db: Database, study: StudyInfo) -> StatusDocument:
    """A study as one JSON document: status, the best sentence, every trial, the front."""
    from engine.optimize.study import StudyDefinition
    from engine.optimize.summary import best_sentence, front_rows, trial_rows
    from storage import studies

    definition = StudyDefinition.model_validate(study.definition)
    trials = studies.list_trials(db, study.id)
    return {
        "study": study.name,
        "status": study.status,
        "note": study.note,
        "objectives": list(definition.objective_keys),
        "created_at": study.created_at.isoformat(),
        "submitted_by": study.submitted_by,
        "best": best_sentence(definition, trials),
        "trials": trial_rows(definition, trials),
        "front": front_rows(definition, trials),
        "definition": study.definition,
    }


def _f(value: object, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_status(doc: StatusDocument) -> None:
    print(f"study {doc['study']}: {doc['status']}" + (f" ({doc['note']})" if doc["note"] else ""))
    print(doc["best"])
    print(
        f"{'#':>3}  {'status':<20}{'TPOT p50':>9}{'TTFT p99':>9}{'tok/s':>7}{'ppl +%':>8}{'pred TPOT':>10}  ok   recipe"
    )
    for r in doc["trials"]:
        print(
            f"{r['trial']:>3}  {r['status'][:19]:<20}{_f(r['tpot_p50_ms']):>9}{_f(r['ttft_p99_ms']):>9}"
            f"{_f(r['tokens_per_s']):>7}{_f(r['ppl_increase_pct'], 2):>8}{_f(r['predicted_tpot_ms']):>10}"
            f"  {(r['feasible'] or '-'):<4} {r['recipe']}" + (f"  [{r['why']}]" if r["why"] else "")
        )


def _study(db: Database, name: str | None) -> StudyInfo:
    from storage import studies

    if not name:
        raise UsageError("name the study, e.g. python -m engine optimize status NAME (list: optimize list)")
    study = studies.get_study(db, name)
    if study is None:
        raise UsageError(f"no study {name!r}; list them with: python -m engine optimize list")
    return study


def _wait(db: Database, name: str, poll_s: float, quiet: bool) -> StudyInfo:
    """Advance the study until it has ended and nothing is in flight; the study at the end."""
    from engine.jobs.submission import served_devices
    from engine.optimize.driver import advance
    from storage import studies

    warned = False
    while True:
        result = advance(db, name)
        for line in result.lines:
            stderr_log(line)
        study = studies.get_study(db, name)
        if study.is_final and result.pending == 0 and not result.busy:
            return study
        device = study.definition["base"].get("device", "cpu")
        if device not in served_devices(db) and not warned and not quiet:
            stderr_log(f"no live worker serves {device}: start one with python -m engine worker --devices {device}")
            warned = True
        time.sleep(poll_s)


def cmd_optimize(args: argparse.Namespace) -> int:
    from engine.jobs.submission import check_submittable
    from engine.optimize.control import change
    from engine.optimize.driver import advance
    from storage import studies

    db = open_db(args)
    if args.action == "list":
        rows = [
            {"study": s.name, "status": s.status, "created_at": s.created_at.isoformat(), "note": s.note}
            for s in studies.list_studies(db)
        ]
        if args.json:
            emit_json(rows)
        for r in [] if args.json else rows:
            print(f"{r['study']:<30}{r['status']:<9}{r['created_at'][:19]}  {r['note'] or ''}")
        return EXIT_OK
    if args.action in ("pause", "resume", "stop"):
        study, line = change(db, _study(db, args.name), args.action, by=cli_actor())
        print(line, file=sys.stderr)
        if args.json:
            emit_json(status_document(db, study))
        return EXIT_OK
    if args.action == "create":
        definition = definition_from_args(args)
        db.check_writable()
        check_submittable(db, definition.effective_base())
        study = studies.create_study(db, definition.name, definition.model_dump(mode="json"), submitted_by=cli_actor())
        for line in advance(db, study.id).lines:
            stderr_log(line)
        args.name = study.name
    study = _study(db, args.name)
    if args.wait or args.action == "wait":
        study = _wait(db, study.name, args.poll, args.json)
    doc = status_document(db, study)
    if args.json:
        emit_json(doc)
    else:
        print_status(doc)
    return EXIT_OK


def _add_base_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the base job (trial 0; every trial changes only the searched knobs)")
    g.add_argument("--spec", metavar="FILE", help="a JSON job spec; other options override its fields")
    g.add_argument("--model", help="demo | synthetic:<arch> | org/name | ./folder | file.gguf")
    g.add_argument("--engine", help=f"inference engine ({', '.join(engines.names())})")
    g.add_argument("--device", help="cpu | cuda:N | cuda:N,M (default cpu)")
    g.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE", help="a base recipe knob, repeatable")
    for flag, what in (
        ("prompt-tokens", "prompt length"),
        ("output-tokens", "tokens generated"),
        ("requests", "measured requests"),
        ("batch-size", "static batch size"),
    ):
        g.add_argument(f"--{flag}", type=int_arg, help=f"workload: {what}")
    g.add_argument("--quality", metavar="LIST", help="accuracy metrics measured besides what the constraints need")
    g.add_argument("--quality-tokens", type=int_arg, metavar="N", help="corpus tokens scored (default 2048)")
    g.add_argument("--quality-corpus", metavar="SRC", help="default | a text file | hf:<dataset>")
    p.set_defaults(prompt_file=None, stop_at_eos=False)


def register(sub: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``optimize`` verb."""
    p = sub.add_parser("optimize", parents=[common, as_json], help="search recipes for the fastest that keeps quality")
    p.add_argument("action", nargs="?", default="create", choices=ACTIONS, help="default create")
    p.add_argument("name", nargs="?", help="the study (status, wait, pause, resume, stop)")
    p.add_argument("--name", dest="study", help="create: the study's name (default study-<timestamp>)")
    _add_base_arguments(p)
    s = p.add_argument_group("the search")
    s.add_argument(
        "--objective",
        default="tpot_ms_p50",
        help="a metric key: tpot_ms_p50 | ttft_ms_p99 | output_tokens_per_s | ...; two for Pareto, "
        "e.g. tpot_ms_p50,ppl_increase_pct",
    )
    s.add_argument("--knobs", help="knobs searched, e.g. dtype,quantization,drop_layers,speculative,attention")
    s.add_argument("--values", action="append", default=[], metavar="KNOB=A,B", help="a knob's candidate values")
    s.add_argument("--exclude", action="append", default=[], metavar="KNOB=A,B", help="values left out")
    s.add_argument("--pin", action="append", default=[], metavar="KNOB=VALUE", help="a knob held at a value")
    s.add_argument("--sampler", default="tpe", choices=("tpe", "nsga2", "random", "grid"), help="default tpe")
    s.add_argument("--seed", type=int_arg, default=0)
    s.add_argument("--no-reuse", action="store_true", help="measure every recipe, even one measured before")
    c = p.add_argument_group("constraints")
    c.add_argument("--max-ppl-increase-pct", type=finite_float, metavar="PCT", help="perplexity increase over the base")
    c.add_argument("--max-kl", dest="max_kl_mean", type=finite_float, metavar="NATS", help="KL mean vs reference")
    c.add_argument("--max-flips", type=finite_float, metavar="R", help="greedy flip rate (0..1)")
    c.add_argument("--min-task-accuracy", type=finite_float, metavar="R", help="every task's accuracy (0..1)")
    c.add_argument("--slo", action="append", default=[], metavar="KEY=BOUND", help="e.g. ttft_ms_p99=2000")
    c.add_argument("--no-fit-check", action="store_true", help="do not prune recipes the estimator says do not fit")
    b = p.add_argument_group("budget")
    b.add_argument("--trials", dest="budget_trials", type=positive_int, help="recipes measured (default 10)")
    b.add_argument("--max-minutes", type=finite_float, help="wall minutes from creation")
    b.add_argument("--parallel", type=positive_int, help="trials in flight at once (default 1)")
    b.add_argument("--timeout", type=finite_float, default=3600.0, help="seconds per trial job (default 3600)")
    b.add_argument("--wait", action="store_true", help="advance the study until it ends (a worker runs the jobs)")
    b.add_argument("--poll", type=finite_float, default=2.0, help="--wait: seconds between rounds")
    p.set_defaults(func=_guard(cmd_optimize))
