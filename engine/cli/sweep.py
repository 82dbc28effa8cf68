"""``python -m engine sweep``: one run per request rate or concurrency, grouped under a sweep name.

Example::

    python -m engine sweep --model demo --engine vllm-server --rates 1,2,4,inf --requests 20 \\
        --slo-ttft-ms 500 --sweep demo-rates

Each point is a normal stored run (``sweep=<name>``), so the Explore page can draw the
latency-throughput curve; ``inf`` means "as fast as possible" (arrival ``max``). The grid
is built by :mod:`engine.spec.sweep` (as the Launch page's), and the points run in a job
process of their own (:mod:`engine.jobs.sweep`), which keeps the model loaded from one point to
the next where the engine allows it (transformers, the managed vLLM server).

``--stop-at-saturation`` runs the loads in increasing order and stops after the first point
whose run is saturated (:mod:`engine.jobs.saturation_stop`): the result says
``stopped_because`` and lists the points not run with the reason (``--json``: ``not_run``),
and the saturated run keeps the stop for the load curve page.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_spec_arguments,
    emit_json,
    open_db,
    spec_from_args,
    stderr_log,
)
from engine.spec.sweep import SweepPoint, build_grid, concurrency_axis, grid_specs, load_of, rate_axis

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.jobs.saturation_stop import Stop
    from engine.jobs.sweep import PointOutcome, PointProcess
    from engine.jsonvalue import JSONObject, JSONValue
    from engine.measure.saturation import Verdict
    from engine.spec import JobSpec
    from storage import Database


def _numbers(text: str, what: str, integer: bool) -> list[float]:
    out: list[float] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part) if not integer else int(part)
        except ValueError as exc:
            raise UsageError(f"--{what}: {part!r} is not a number") from exc
        if (math.isnan(value) or value <= 0) or (integer and math.isinf(value)):
            raise UsageError(f"--{what}: {part!r} must be a positive number")
        out.append(value)
    if not out:
        raise UsageError(f"--{what} needs at least one value, e.g. 1,2,4")
    return out


def _axis(args: argparse.Namespace) -> tuple[str, list[float]]:
    """('rates' | 'concurrency', the values): exactly one of the two options."""
    if bool(args.rates) == bool(args.concurrencies):
        raise UsageError("give exactly one of --rates (e.g. 1,2,4,inf) or --concurrencies (e.g. 1,4,16)")
    if args.rates:
        return "rates", _numbers(args.rates, "rates", False)
    return "concurrency", _numbers(args.concurrencies, "concurrencies", True)


def _row(point: SweepPoint, outcome: PointOutcome, verdict: Verdict | None) -> JSONObject:
    if not outcome.ok:
        return {"point": point.label, "run_id": outcome.run_id, "status": "failed", "error": outcome.error}
    m = outcome.metrics
    saturation = None if verdict is None else {"saturated": verdict.saturated, "reason": verdict.reason}
    return {
        "point": point.label,
        "run_id": outcome.run_id,
        "status": "done",
        "achieved_rate": (m.get("load") or {}).get("achieved_rate"),
        "requests_per_s": m["requests_per_s"],
        "ttft_p50_ms": m["ttft_ms"]["p50"],
        "tpot_p50_ms": m["tpot_ms"]["p50"],
        "e2el_p99_ms": m["e2el_ms"]["p99"],
        "output_tokens_per_s": m["output_tokens_per_s"],
        "goodput_requests_per_s": m["goodput_requests_per_s"],
        "goodput_fraction": m["goodput_fraction"],
        "failed_requests": m["failed"],
        "saturation": saturation,
    }


def _print_table(name: str, swept: SweepRun) -> None:
    print(f"sweep {name}")
    print(
        f"{'point':<18}{'run':>5}{'sent/s':>8}{'TTFT p50':>10}{'TPOT p50':>10}{'E2EL p99':>10}"
        f"{'tok/s':>8}{'goodput':>9}{'failed':>7}  saturated"
    )
    for r in swept.rows:
        if r["status"] != "done":
            print(f"{r['point']:<18}{r['run_id'] or '-':>5}  failed: {r['error']}")
            continue
        sent = r["achieved_rate"]
        sent_text = "burst" if sent is not None and sent > 9999 else _f(sent)  # everything sent at once
        print(
            f"{r['point']:<18}{r['run_id']:>5}{sent_text:>8}{_f(r['ttft_p50_ms']):>10}"
            f"{_f(r['tpot_p50_ms']):>10}{_f(r['e2el_p99_ms']):>10}{_f(r['output_tokens_per_s'], 1):>8}"
            f"{_f(r['goodput_fraction']):>9}{r['failed_requests']:>7}  {_saturated(r['saturation'])}"
        )
    if swept.stop is not None:
        print(f"stopped: {swept.stop.because}")
    for r in swept.not_run:
        print(f"{r['point']:<18}{'-':>5}  {r['reason']}")


def _saturated(saturation: JSONValue) -> str:
    if not isinstance(saturation, dict):  # None: not judged
        return "-"
    return {True: "yes", False: "no"}.get(saturation["saturated"], "cannot tell")


@dataclass
class SweepRun:
    """The sweep's points as they ran: a row per run point, where it stopped, the points not run."""

    rows: list[JSONObject] = field(default_factory=list)
    stop: Stop | None = None
    not_run: list[JSONObject] = field(default_factory=list)
    previous: tuple[float, float] | None = None  # (load, requests/s) of the last done point


def _run_points(
    name: str, points: list[SweepPoint], specs: list[JobSpec], db: Database, stop_at_saturation: bool
) -> SweepRun:
    """Every point in a job process, in order (the model kept loaded from point to point where the engine allows
    it); with ``stop_at_saturation`` none above a saturated one."""
    from engine.jobs.sweep import PointProcess

    with PointProcess(db.url, name, stderr_log) as process:
        return _each_point(name, points, specs, db, stop_at_saturation, process)


def _each_point(
    name: str,
    points: list[SweepPoint],
    specs: list[JobSpec],
    db: Database,
    stop_at_saturation: bool,
    process: PointProcess,
) -> SweepRun:
    from engine.jobs.saturation_stop import Stop, point_verdict, record_stop

    swept = SweepRun()
    for point, spec in zip(points, specs, strict=True):
        load = load_of(point.data)
        if swept.stop is not None and swept.stop.beyond(load):
            value = load[1] if load is not None and math.isfinite(load[1]) else None  # None: as fast as possible
            swept.not_run.append({"point": point.label, "load": value, "reason": swept.stop.not_run_reason()})
            continue
        stderr_log(f"[{name}] {point.label}")
        outcome = process.run(spec.canonical_json())
        if not outcome.ok:
            stderr_log(f"[{name}] {point.label} failed: {outcome.error}")
        rps = outcome.metrics.get("requests_per_s") if outcome.ok else None
        verdict = point_verdict(outcome.saturation, load, rps, swept.previous) if outcome.ok else None
        swept.rows.append(_row(point, outcome, verdict))
        if load is not None and rps:
            swept.previous = (load[1], float(rps))
        if stop_at_saturation and swept.stop is None and verdict is not None and verdict.saturated and load:
            swept.stop = Stop(outcome.run_id, load, verdict)
            stderr_log(f"[{name}] stopping: {swept.stop.because}")
    if swept.stop is not None:
        record_stop(db, swept.stop, [{"point": r["point"], "load": r["load"], "job_id": None} for r in swept.not_run])
    return swept


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run every point in turn in a job process (the model loaded once where the engine allows it); a failed point
    is stored as failed and the sweep goes on (with ``--stop-at-saturation``: the loads in increasing order, none
    above the first saturated point)."""
    from engine.run import runner

    kind, values = _axis(args)
    if args.stop_at_saturation:
        values = sorted(values)
    base = spec_from_args(args)
    axis = rate_axis(values, base.workload.arrival) if kind == "rates" else concurrency_axis([int(v) for v in values])
    points = build_grid(base, [axis])
    specs = grid_specs(points)
    for spec in specs:
        runner.preflight(spec)
    name = args.sweep or f"{base.recipe.engine}-{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    db = open_db(args)  # checked (and migrated) once here; each point's process opens it again
    swept = _run_points(name, points, specs, db, args.stop_at_saturation)
    if args.json:
        emit_json(
            {
                "sweep": name,
                "points": swept.rows,
                "stopped_because": swept.stop.because if swept.stop is not None else None,
                "not_run": swept.not_run,
            }
        )
    else:
        _print_table(name, swept)
    return EXIT_FAILED if any(r["status"] != "done" for r in swept.rows) else EXIT_OK


def _f(v: JSONValue, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``sweep`` verb."""
    p = subparsers.add_parser(
        "sweep", parents=[common, as_json], help="one run per request rate or concurrency (a latency-throughput curve)"
    )
    add_spec_arguments(p)
    g = p.add_argument_group("sweep")
    g.add_argument("--rates", metavar="LIST", help="request rates per second, e.g. 1,2,4,inf (inf: all at once)")
    g.add_argument("--concurrencies", metavar="LIST", help="max concurrencies, e.g. 1,4,16")
    g.add_argument("--sweep", metavar="NAME", help="the sweep's name (default: engine-kind-timestamp)")
    g.add_argument(
        "--stop-at-saturation",
        action="store_true",
        help="run the loads in increasing order and stop after the first point whose server was saturated "
        "(its queue grew while it fell behind the offered load); the points not run are listed with the reason",
    )
    p.set_defaults(func=cmd_sweep)
