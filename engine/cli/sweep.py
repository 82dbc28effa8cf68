"""``python -m engine sweep``: one run per request rate or concurrency, grouped under a sweep name.

Example::

    python -m engine sweep --model demo --engine vllm-server --rates 1,2,4,inf --requests 20 \\
        --slo-ttft-ms 500 --sweep demo-rates

Each point is a normal stored run (``sweep=<name>``), so the Explore page can draw the
latency-throughput curve; ``inf`` means "as fast as possible" (arrival ``max``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

from engine.spec import JobSpec, parse_job_spec


def _numbers(text: str, what: str, integer: bool) -> list[float]:
    from engine.cli.common import UsageError

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


def sweep_points(base: JobSpec, rates: list[float] | None, concurrencies: list[int] | None) -> list[JobSpec]:
    """The JobSpec of every point: the base spec with the arrival and rate/concurrency of that point."""
    data = base.model_dump(mode="json")
    wl = data["workload"]
    points = []
    for value in rates or []:
        w = dict(wl, batch_size=1)
        if math.isinf(value):
            w.update(arrival="max", rate=None, burstiness=1.0)
        else:
            w.update(arrival="gamma" if wl.get("arrival") == "gamma" else "poisson", rate=value)
            if w["arrival"] == "poisson":
                w["burstiness"] = 1.0
        points.append(parse_job_spec(dict(data, workload=w)))
    for value in concurrencies or []:
        w = dict(wl, batch_size=1, arrival="concurrency", max_concurrency=int(value), rate=None, burstiness=1.0)
        points.append(parse_job_spec(dict(data, workload=w)))
    return points


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run every point in turn; a failed point is stored as failed and the sweep goes on."""
    from engine.cli.common import EXIT_FAILED, EXIT_OK, UsageError, emit_json, open_db, spec_from_args
    from engine.run import runner

    if bool(args.rates) == bool(args.concurrencies):
        raise UsageError("give exactly one of --rates (e.g. 1,2,4,inf) or --concurrencies (e.g. 1,4,16)")
    rates = _numbers(args.rates, "rates", False) if args.rates else None
    concs = [int(v) for v in _numbers(args.concurrencies, "concurrencies", True)] if args.concurrencies else None
    base = spec_from_args(args)
    points = sweep_points(base, rates, concs)
    for spec in points:
        runner.preflight(spec)
    name = args.sweep or f"{base.recipe.engine}-{'rates' if rates else 'concurrency'}-{time.strftime('%Y%m%d-%H%M%S')}"
    db = open_db(args)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    rows: list[dict[str, Any]] = []
    failed = 0
    for spec in points:
        wl = spec.workload
        label = (
            f"rate {wl.rate:g}/s"
            if wl.rate
            else (f"concurrency {wl.max_concurrency}" if wl.arrival == "concurrency" else "max rate")
        )
        log(f"[{name}] {label}")
        try:
            result = runner.run_benchmark(spec, db=db, log=log, sweep=name)
        except runner.BenchmarkFailed as exc:
            failed += 1
            rows.append({"point": label, "run_id": exc.run_id, "status": "failed", "error": exc.reason})
            continue
        m = result.metrics
        load = m.get("load") or {}
        rows.append(
            {
                "point": label,
                "run_id": result.run_id,
                "status": "done",
                "achieved_rate": load.get("achieved_rate"),
                "requests_per_s": m["requests_per_s"],
                "ttft_p50_ms": m["ttft_ms"]["p50"],
                "tpot_p50_ms": m["tpot_ms"]["p50"],
                "e2el_p99_ms": m["e2el_ms"]["p99"],
                "output_tokens_per_s": m["output_tokens_per_s"],
                "goodput_requests_per_s": m["goodput_requests_per_s"],
                "goodput_fraction": m["goodput_fraction"],
                "failed_requests": m["failed"],
            }
        )
    if args.json:
        emit_json({"sweep": name, "points": rows})
    else:
        print(f"sweep {name}")
        print(
            f"{'point':<18}{'run':>5}{'sent/s':>8}{'TTFT p50':>10}{'TPOT p50':>10}{'E2EL p99':>10}"
            f"{'tok/s':>8}{'goodput':>9}{'failed':>7}"
        )
        for r in rows:
            if r["status"] != "done":
                print(f"{r['point']:<18}{r['run_id'] or '-':>5}  failed: {r['error']}")
                continue
            sent = r["achieved_rate"]
            sent_text = "burst" if sent is not None and sent > 9999 else _f(sent)  # everything sent at once
            print(
                f"{r['point']:<18}{r['run_id']:>5}{sent_text:>8}{_f(r['ttft_p50_ms']):>10}"
                f"{_f(r['tpot_p50_ms']):>10}{_f(r['e2el_p99_ms']):>10}{_f(r['output_tokens_per_s'], 1):>8}"
                f"{_f(r['goodput_fraction']):>9}{r['failed_requests']:>7}"
            )
    return EXIT_FAILED if failed else EXIT_OK


def _f(v: Any, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def register(subparsers: Any, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``sweep`` verb."""
    from engine.cli.common import add_spec_arguments

    p = subparsers.add_parser(
        "sweep", parents=[common, as_json], help="one run per request rate or concurrency (a latency-throughput curve)"
    )
    add_spec_arguments(p)
    g = p.add_argument_group("sweep")
    g.add_argument("--rates", metavar="LIST", help="request rates per second, e.g. 1,2,4,inf (inf: all at once)")
    g.add_argument("--concurrencies", metavar="LIST", help="max concurrencies, e.g. 1,4,16")
    g.add_argument("--sweep", metavar="NAME", help="the sweep's name (default: engine-kind-timestamp)")
    p.set_defaults(func=cmd_sweep)
