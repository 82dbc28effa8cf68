"""Job verbs: ``submit``, ``worker``, ``jobs``, ``cancel``, ``retry``.

``submit`` takes the same options as ``run`` and runs the same pre-flight, so bad
input (an invalid value, a device that does not exist or is busy, a model path the
operator does not allow) exits 2 and queues nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from engine.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_spec_arguments,
    emit_json,
    finite_float,
    listed_as_json_or_empty,
    open_db,
    parse_id,
    positive_int,
    spec_from_args,
)
from engine.cli.values import name_text
from engine.jobs.submission import check_submittable, served_devices
from engine.settings import cli_actor
from engine.spec import SpecError

if TYPE_CHECKING:
    from engine.cli.common import Subparsers
    from engine.jobs.worker import Worker
    from engine.jsonvalue import JSONObject
    from storage import Database
    from storage.job_records import JobInfo

EXECUTORS = ("local", "ray")
Verb = Callable[[argparse.Namespace], int]  # a verb's function: the parsed options to the exit code


class WorkerOptions(TypedDict):
    """What ``worker`` hands either executor's :class:`~engine.jobs.worker.Worker`."""

    once: bool
    stale_after_s: float
    grace_s: float
    ticks: list[Callable[[Database], list[str]]]  # the recipe studies' and SLA searches' drivers


def job_row(job: JobInfo) -> JSONObject:
    """A job as one JSON object (``jobs --json``)."""
    return {
        "job_id": job.id,
        "status": job.status,
        "name": job.name,
        "sweep": job.sweep,
        "device": job.device,
        "phase": job.phase,
        "progress": job.progress,
        "eta_s": job.eta_s,
        "elapsed_s": job.elapsed_s,
        "attempts": job.attempts,
        "worker_id": job.worker_id,
        "created_at": job.created_at.isoformat(),
        "run_id": job.run_id,
        "error": job.error,
        "submitted_by": job.submitted_by,
        "cancelled_by": job.cancelled_by,
        "spec": job.spec,
    }


def port_number(text: str) -> int:
    """A TCP port, 0..65535 (0: the system picks a free one)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0..65535)")
    return port


def _parse_job_id(text: str) -> int:
    return parse_id(text, "job id", "list jobs with: python -m engine jobs")


def cmd_submit(args: argparse.Namespace) -> int:
    from storage import jobs

    spec = spec_from_args(args)
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    db = open_db(args)
    db.check_writable()
    traffic = check_submittable(db, spec)
    print(traffic.words(spec.workload.traffic), file=sys.stderr)  # the schedule up front
    job_id = jobs.submit(db, spec, sweep=args.sweep, timeout_s=args.timeout or 3600.0, submitted_by=cli_actor())
    if args.json:
        emit_json(job_row(jobs.get_job(db, job_id)))
    else:
        print(job_id)
        if spec.device not in served_devices(db):
            print(
                f"queued job {job_id}; no live worker serves {spec.device} yet: "
                f"python -m engine worker --devices {spec.device}",
                file=sys.stderr,
            )
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    from engine.measure.devices import parse_device_list
    from engine.settings import database_url, get_settings

    executor = args.executor or get_settings().executor
    if executor not in EXECUTORS:
        raise UsageError(f"--executor {executor!r}: choose one of {', '.join(EXECUTORS)}")
    devices = parse_device_list(args.devices) if args.devices != "all" or executor == "local" else None
    open_db(args)  # a bad URL exits 2 here
    from engine.optimize.driver import advance_all  # the worker advances recipe studies and SLA searches too
    from engine.optimize.sla import advance_running

    options: WorkerOptions = {
        "once": args.once,
        "stale_after_s": args.stale_after,
        "grace_s": args.grace,
        "ticks": [advance_all, advance_running],
    }
    if executor == "ray":
        worker = _ray_executor(args, database_url(args.db), devices, options)
    else:
        from engine.jobs.worker import Worker

        worker = Worker(database_url(args.db), devices, **options)
    if args.metrics_port is None:
        return worker.run()
    from engine.jobs.exporter import serve_worker

    try:
        exporter = serve_worker(worker, args.metrics_port, args.metrics_addr)
    except OSError as exc:
        raise UsageError(f"--metrics-port {args.metrics_port}: {exc.strerror or exc}") from exc
    print(f"Prometheus metrics at http://{args.metrics_addr}:{exporter.port}/metrics", file=sys.stderr, flush=True)
    try:
        return worker.run()
    finally:
        exporter.stop()


def _ray_executor(args: argparse.Namespace, db_url: str, devices: list[str] | None, options: WorkerOptions) -> Worker:
    """The worker with its jobs on Ray (engine/jobs/ray_placement.py), connected; one line and exit 2 when it cannot be."""
    from engine.jobs.ray_cluster import ClusterUnavailable
    from engine.jobs.ray_placement import RayPlacement
    from engine.jobs.worker import Worker
    from engine.settings import get_settings

    settings = get_settings()
    try:
        resources = json.loads(args.ray_resources) if args.ray_resources else {}
    except json.JSONDecodeError as exc:
        raise UsageError(f"--ray-resources: not JSON ({exc.msg}); e.g. '{{\"accelerator_type:H100\": 0.001}}'") from exc
    if not isinstance(resources, dict) or not all(isinstance(v, int | float) for v in resources.values()):
        raise UsageError("--ray-resources: a JSON object of resource names to amounts, e.g. '{\"node_a\": 1}'")
    try:
        placement = RayPlacement(
            devices,
            address=args.ray_address or settings.ray_address,
            num_cpus=args.ray_num_cpus if args.ray_num_cpus is not None else settings.ray_num_cpus,
            resources=resources,
            dashboard_url=settings.ray_dashboard_url,
        )
    except ClusterUnavailable as exc:
        raise UsageError(str(exc)) from exc
    print(f"[worker] {placement.cluster}", file=sys.stderr, flush=True)
    return Worker(db_url, placement=placement, **options)


def cmd_jobs(args: argparse.Namespace) -> int:
    from storage import jobs

    db = open_db(args)
    rows = jobs.list_jobs(db, limit=args.limit)
    if listed_as_json_or_empty(
        args, rows, job_row, "no jobs yet; queue one with: python -m engine submit --model demo"
    ):
        return EXIT_OK
    print(f"{'id':>5}  {'status':<10}{'phase':<11}{'progress':>9}  {'device':<9}{'sweep':<16}{'run':>5}  reason")
    for j in rows:
        run = "-" if j.run_id is None else str(j.run_id)
        print(
            f"{j.id:>5}  {j.status:<10}{(j.phase or '-'):<11}{j.progress * 100:>8.0f}%  {j.device:<9}"
            f"{(j.sweep or '-')[:15]:<16}{run:>5}  {j.error or ''}"
        )
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    from storage import jobs

    job_id = _parse_job_id(args.job_id)
    db = open_db(args)
    job = jobs.cancel(db, job_id, by=cli_actor())
    if job is None:
        raise UsageError(f"no job {job_id}; list jobs with: python -m engine jobs")
    if job.status == jobs.CANCELLED:
        print(f"job {job_id} cancelled")
    elif job.status == jobs.RUNNING:
        print(f"job {job_id}: cancel requested; its worker stops it within seconds")
    else:
        print(f"job {job_id} already ended ({job.status}); nothing to cancel", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_retry(args: argparse.Namespace) -> int:
    from storage import jobs

    job_id = _parse_job_id(args.job_id)
    db = open_db(args)
    job = jobs.get_job(db, job_id)
    if job is None:
        raise UsageError(f"no job {job_id}; list jobs with: python -m engine jobs")
    new_id = jobs.retry(db, job_id, by=cli_actor())
    if new_id is None:
        raise UsageError(f"job {job_id} is {job.status}; only failed or cancelled jobs can be retried")
    print(new_id)
    return EXIT_OK


def register(sub: Subparsers, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the job verbs to ``python -m engine``."""
    p = sub.add_parser("submit", parents=[common, as_json], help="queue a benchmark job for a worker")
    add_spec_arguments(p)
    p.add_argument(
        "--sweep", metavar="NAME", type=name_text, help="group the job under a named sweep (at most 200 characters)"
    )
    p.add_argument("--timeout", type=finite_float, metavar="S", help="seconds before the job is stopped (default 3600)")
    p.set_defaults(func=_guard(cmd_submit))

    _worker_parser(
        sub.add_parser("worker", parents=[common], help="serve queued jobs on this machine's devices or a Ray cluster")
    )

    p = sub.add_parser("jobs", parents=[common, as_json], help="list queued, running and finished jobs")
    p.add_argument("--limit", type=positive_int, default=50)
    p.set_defaults(func=_guard(cmd_jobs))

    p = sub.add_parser("cancel", parents=[common], help="cancel a queued or running job")
    p.add_argument("job_id")
    p.set_defaults(func=_guard(cmd_cancel))

    p = sub.add_parser("retry", parents=[common], help="queue a failed or cancelled job again")
    p.add_argument("job_id")
    p.set_defaults(func=_guard(cmd_retry))


def _worker_parser(p: argparse.ArgumentParser) -> None:
    """The ``worker`` verb's options: its slots and stops, metrics, and the executor (local or Ray)."""
    p.add_argument(
        "--devices",
        default="all",
        help="slots, e.g. cpu,cuda:0,cuda:1+2 (+ joins GPUs into one slot); default all: the CPU and every GPU",
    )
    p.add_argument("--once", action="store_true", help="exit when the queue is empty")
    p.add_argument(
        "--stale-after",
        type=finite_float,
        default=20.0,
        metavar="S",
        help="a worker silent this long is lost; its jobs are recovered (default 20)",
    )
    p.add_argument(
        "--grace",
        type=finite_float,
        default=5.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL when stopping a job (default 5)",
    )
    p.add_argument(
        "--metrics-port", type=port_number, metavar="N", help="serve Prometheus metrics on this port (0: a free one)"
    )
    p.add_argument("--metrics-addr", default="127.0.0.1", help="address of --metrics-port (default 127.0.0.1)")
    p.add_argument(
        "--executor",
        metavar="NAME",
        help="local (processes on this host, the default) or ray (tasks on a Ray cluster); LATENCYLAB_EXECUTOR",
    )
    p.add_argument(
        "--ray-address", metavar="ADDR", help="the Ray cluster (host:port, ray://..., auto); LATENCYLAB_RAY_ADDRESS"
    )
    p.add_argument(
        "--ray-resources",
        metavar="JSON",
        help="custom Ray resources every job asks for, e.g. '{\"accelerator_type:H100\": 0.001}'",
    )
    p.add_argument(
        "--ray-num-cpus",
        type=finite_float,
        metavar="N",
        help="CPUs each job asks of Ray (default 1); LATENCYLAB_RAY_NUM_CPUS",
    )
    p.set_defaults(func=_guard(cmd_worker))


def _guard(func: Verb) -> Verb:
    """Storage errors become one-line usage errors (exit 2), never tracebacks."""

    def wrapped(args: argparse.Namespace) -> int:
        from storage import StorageError

        try:
            return func(args)
        except StorageError as exc:
            raise UsageError(str(exc)) from exc
        except ValueError as exc:
            if isinstance(exc, SpecError):
                raise
            raise UsageError(str(exc)) from exc

    return wrapped
