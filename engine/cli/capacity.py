"""``python -m engine capacity``: how many replicas (and dollars) a traffic needs within an SLO, predicted.

The traffic and the recipe are the same options as ``run`` (``--model``, ``--engine``, ``--knob``, the workload
and traffic options, ``--spec``): a source without a schedule needs its peak rate (``--rate``, Poisson unless
``--arrival gamma``); a trace brings its own. The SLO is ``--slo-ttft-ms`` / ``--slo-tpot-ms`` /
``--slo-e2el-ms`` at ``--slo-percentile`` (default 90), or with ``--slo-goodput 0.95`` the share of requests
that must meet every limit. The configurations are every ``--variant`` (``NAME:KNOB=VALUE,...``; none: the
recipe as given) on every ``--hardware`` entry at every ``--tp``. ``--price h100-sxm=4.5`` overrides the
catalog's list price (USD per device-hour, an assumption either way). Each configuration's calibration is
fitted from the database's measured runs (and carried to the hardware by the roofline), else the
uncalibrated roofline, said so with no band.

Prints a table (configuration, rate one replica sustains, replicas for the peak, GPU-hours per hour, $ per
1M output tokens, calibration) and the answer in a sentence: the cheapest within the SLO, or, when no
configuration meets it, the closest. ``--json``: one document. Progress goes to stderr. Bad input exits 2
in one line; nothing is stored.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_OK, UsageError, add_spec_arguments, emit_json, open_db, spec_from_args, stderr_log
from engine.cli.values import finite_float, positive_int

if TYPE_CHECKING:
    from engine.spec import JobSpec
    from engine.whatif.capacity.slo import CapacitySLO
    from engine.whatif.hardware import Hardware

DEFAULT_HARDWARE = "h100-sxm,a100-80gb,l40s"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    as_json: argparse.ArgumentParser,
) -> None:
    """Add the ``capacity`` verb."""
    p = subparsers.add_parser(
        "capacity",
        parents=[common, as_json],
        help="capacity plan: the rate one replica sustains within an SLO, replicas for the peak, cost (predicted)",
    )
    add_spec_arguments(p)
    c = p.add_argument_group("capacity plan")
    c.add_argument("--hardware", default=DEFAULT_HARDWARE, help=f"hardware keys (default {DEFAULT_HARDWARE})")
    c.add_argument("--tp", default=None, metavar="LIST", help="tensor parallelism per replica, e.g. 1,2 (default 1)")
    c.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KNOB=VALUE,...",
        help="a recipe variant, repeatable, e.g. --variant base --variant fp8:kv_cache_dtype=fp8",
    )
    c.add_argument("--slo-percentile", type=finite_float, default=90.0, help="the SLO's percentile (default 90)")
    c.add_argument(
        "--slo-goodput", type=finite_float, default=None, help="instead: the share of requests meeting every limit"
    )
    c.add_argument("--price", default="", metavar="KEY=USD,...", help="USD per device-hour, e.g. h100-sxm=4.5")
    c.add_argument("--sample", type=positive_int, default=1000, help="requests simulated per probe (default 1000)")
    c.add_argument("--peak-window-s", type=finite_float, default=60.0, help="a trace's peak window (default 60 s)")
    p.set_defaults(func=cmd_capacity)


def _tps(text: str | None) -> list[int | None]:
    if text is None:
        return [None]
    try:
        tps = [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise UsageError(f"--tp {text!r} is not a list of whole numbers, e.g. 1,2") from exc
    if not tps or min(tps) < 1 or max(tps) > 64:
        raise UsageError(f"--tp {text!r} is not a list of whole numbers from 1 to 64, e.g. 1,2")
    return list(dict.fromkeys(tps))


def _slo(args: argparse.Namespace) -> CapacitySLO:
    from engine.whatif.capacity.slo import CapacitySLO, SloError

    try:
        return CapacitySLO(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2el_ms, args.slo_percentile, args.slo_goodput)
    except SloError as exc:
        raise UsageError(str(exc)) from exc


def _hardware(entries: dict[str, Hardware], text: str) -> list[Hardware]:
    from engine.whatif.hardware import UnknownHardware, get_hardware

    keys = list(dict.fromkeys(k.strip().lower() for k in text.split(",") if k.strip()))
    if not keys:
        raise UsageError("--hardware needs at least one hardware key, e.g. h100-sxm,a100-80gb")
    try:
        return [get_hardware(k, entries) for k in keys]
    except UnknownHardware as exc:
        raise UsageError(str(exc)) from exc


def _spec(args: argparse.Namespace, hardware: list[Hardware]) -> JobSpec:
    """The job of the options, a source without a schedule sending Poisson arrivals at ``--rate``, as many
    requests as a probe simulates unless ``--requests`` says otherwise, on a GPU unless ``--device`` or every
    hardware entry says a CPU (a GPU's knobs, ``gpu_memory_utilization``, are refused on a CPU)."""
    from engine.spec import parse_job_spec

    if args.rate is not None and args.arrival is None:
        args.arrival = "poisson"
    if args.device is None:
        args.device = "cuda:0" if any(h.kind == "gpu" for h in hardware) else "cpu"
    spec = spec_from_args(args)
    if args.requests is None and not spec.workload.traffic.scheduled:
        data = spec.model_dump(mode="json")
        data["workload"]["requests"] = args.sample
        spec = parse_job_spec(data)
    return spec


def cmd_capacity(args: argparse.Namespace) -> int:
    """Plan the options' traffic on every configuration; print the table and the answer (or one JSON document)."""
    from engine.whatif.capacity.configs import prepared, variants_of
    from engine.whatif.capacity.cost import parse_prices
    from engine.whatif.capacity.planner import calibrator, plan_capacity
    from engine.whatif.capacity.table import render_text
    from engine.whatif.capacity.traffic import TrafficError
    from engine.whatif.hardware import catalog

    slo, tps = _slo(args), _tps(args.tp)
    if args.peak_window_s <= 0:
        raise UsageError("--peak-window-s must be a positive number of seconds")
    try:
        variants = variants_of(args.variant)
        prices = parse_prices(args.price)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    db = open_db(args)
    hardware = _hardware(catalog(db), args.hardware)
    unknown = sorted(set(prices) - {h.key for h in hardware})
    if unknown:
        raise UsageError(f"--price names hardware not planned: {', '.join(unknown)} (planned: {args.hardware})")
    spec = _spec(args, hardware)
    try:
        ready = prepared(
            spec, variants, hardware, tps, calibrator(db, stderr_log), prices,
            sample=args.sample, window_s=args.peak_window_s,
        )  # fmt: skip
    except TrafficError as exc:
        raise UsageError(str(exc)) from exc
    configs, left = ready.configs, ready.left_out
    if not configs:
        more = f" (and {len(left) - 1} more left out)" if len(left) > 1 else ""
        raise UsageError(f"nothing to plan: {left[0].label}: {left[0].reason}{more}")
    for x in left:
        stderr_log(f"left out: {x.label}: {x.reason}")
    stderr_log(f"sizing {len(configs)} configuration(s) for {slo.words()} ...")
    result = plan_capacity(configs, ready.traffic, slo, left_out=left, progress=stderr_log)
    stderr_log(f"done in {result.wall_s:.1f} s")
    if args.json:
        emit_json({**result.to_dict(), "traffic_words": spec.workload.traffic.words()})
    else:
        print(render_text(result, spec.workload.traffic.words()))
    return EXIT_OK
