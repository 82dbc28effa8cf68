"""``python -m engine simulate``: a serving run predicted by the simulator on a hardware entry, stored as a
predicted run.

The job is described with the same options as ``run`` (``--spec``, ``--model``, ``--engine``, the
workload and traffic options ...), plus ``--hardware KEY`` (a catalog key, default this machine's measured
CPU, ``local:cpu``: ``python -m engine calibrate`` measures it) and ``--tp N``. The step costs come from
the database's measured runs of the engine's what-if family (``--calibration-runs`` to name them), fitted
with a leave-one-out band; without any, the uncalibrated roofline, with no band claimed. Bad input exits 2
in one line before anything is fitted or stored: an unknown hardware key, an engine or recipe the simulator
does not model, a plan the hardware cannot hold (weights larger than its memory, a prompt longer than the
KV space). Progress goes to stderr; ``--json`` prints one result object shaped as a measured run's, with
``"predicted": true`` and its ``band``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from engine.cli.common import (
    EXIT_OK,
    Subparsers,
    UsageError,
    add_spec_arguments,
    emit_json,
    open_db,
    spec_from_args,
    stderr_log,
)
from engine.cli.values import positive_int

if TYPE_CHECKING:
    from engine.whatif.hardware import Hardware
    from storage import Database


def register(subparsers: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the ``simulate`` verb."""
    p = subparsers.add_parser(
        "simulate",
        parents=[common, as_json],
        help="predict a serving run on hardware you may not own (the serving simulator) and store it as predicted",
    )
    add_spec_arguments(p)
    w = p.add_argument_group("what-if")
    w.add_argument("--hardware", default="local:cpu", help="hardware key (default local:cpu: this machine's CPU)")
    w.add_argument("--tp", type=positive_int, default=None, help="tensor parallelism: GPUs per replica (vllm)")
    w.add_argument(
        "--calibration-runs",
        metavar="IDS",
        default=None,
        help="comma-separated measured run ids to calibrate from (default: the database's runs of the engine)",
    )
    p.set_defaults(func=cmd_simulate)


def _run_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise UsageError(f"--calibration-runs {text!r} is not a list of run ids (e.g. 3,4,7)") from exc
    if not ids or min(ids) < 1:
        raise UsageError(f"--calibration-runs {text!r} is not a list of run ids (e.g. 3,4,7)")
    return ids


def _hardware(db: Database, key: str) -> Hardware:
    from engine.whatif.hardware import UnknownHardware, catalog, get_hardware

    try:
        return get_hardware(key, catalog(db))
    except UnknownHardware as exc:
        raise UsageError(str(exc)) from exc


def cmd_simulate(args: argparse.Namespace) -> int:
    """Predict the options' job on ``--hardware`` and store it as a predicted run."""
    from engine.report.results import render_table, result_object
    from engine.whatif.predict.calibration import calibration_for
    from engine.whatif.predict.run import PredictError, new_run, predict, prepare
    from storage.runs import get_run, save_run

    runs = _run_ids(args.calibration_runs)
    db = open_db(args)
    hardware = _hardware(db, args.hardware)
    from engine.whatif.capacity.configs import Variant, on_hardware

    spec = on_hardware(spec_from_args(args), Variant("as given"), hardware, args.tp)
    try:
        setup = prepare(spec, hardware, args.tp)
    except PredictError as exc:
        raise UsageError(str(exc)) from exc
    db.check_writable()
    t0 = time.perf_counter()
    stderr_log(f"calibrating {setup.case.deployment.terms.words} for {hardware.name} ...")
    calibration = calibration_for(db, setup.case.deployment.terms, hardware, runs, progress=stderr_log)
    stderr_log(f"{calibration.label} ({time.perf_counter() - t0:.1f} s)")
    stderr_log(f"simulating {len(setup.case.requests):,} requests on {hardware.name} ...")
    prediction = predict(setup, calibration)
    stats = prediction.result.stats
    stderr_log(
        f"simulated {stats.steps:,} engine steps ({stats.duration_s:,.1f} s served) in {prediction.wall_s:.1f} s"
    )
    run_id = save_run(db, new_run(prediction))
    obj = result_object(get_run(db, run_id))
    if args.json:
        emit_json(obj)
    else:
        print(render_table(obj))
        print(f"\nstored as predicted run {run_id}  (python -m engine show {run_id})", file=sys.stdout)
    return EXIT_OK
