"""One benchmark from start to finish: pre-flight, load, warm up, measure, store.

Bad input is refused by :func:`preflight` before anything is stored. A run that fails
after that is stored as *failed* with its reason (never as a partial success); a run
that succeeds is stored with every request's raw stamps in one transaction.

Failed requests: a run whose measured requests all failed is failed (reason: the first
distinct request errors), and so is a run whose error rate (failed / measured) is above
the workload's ``max_error_rate``; both keep their requests and metrics. Otherwise the
run is done and ``metrics["error_rate"]`` says how many failed.

Queueing, for every engine: the time a request waited client-side after the measured
phase started (from its due time, for an arrival process) before it was sent; in static
batches every request is due at the phase start, so it includes the batches before its own.
"""

from __future__ import annotations

import os
import resource
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.backends.base import REMOTE_DEVICE, Backend, LauncherFactory, Sender, get_backend
from engine.jsonvalue import JSONObject
from engine.measure import aggregates, memory, provenance, saturation, server_metrics, telemetry
from engine.measure.breakdowns import per_turn
from engine.measure.client_lag import ClientSample, client_group
from engine.measure.records import RequestRecord
from engine.run.failures import RunRejected, check_failures, failure_reason
from engine.run.loading import HeldLoad, Loaded, holds_loads, load, load_or_reuse
from engine.run.plan import RequestPlan
from engine.run.preflight import preflight
from engine.run.profile import profile_phase
from engine.run.sending import sending
from engine.run.store import Where
from engine.spec import JobSpec, SpecError

if TYPE_CHECKING:
    from engine.run.repeats import Measured
    from storage import Database

PHASES: tuple[str, ...] = ("loading", "warm-up", "measuring", "evaluating", "saving")
DUE_ARRIVALS = ("poisson", "gamma", "trace")  # requests with due times of their own (latency from due is kept)


@dataclass
class ProgressState:
    """Live progress, cheap to update from the measuring loop and polled by others."""

    phase: str = "starting"
    tokens_done: int = 0
    tokens_total: int = 0
    requests_done: int = 0
    requests_total: int = 0
    note: str = ""
    phase_started: float = field(default_factory=time.monotonic)

    def enter(self, phase: str, note: str = "") -> None:
        self.phase, self.note, self.phase_started = phase, note, time.monotonic()

    @property
    def fraction(self) -> float | None:
        if self.tokens_total <= 0:
            return None
        return min(1.0, self.tokens_done / self.tokens_total)


class BenchmarkFailed(RuntimeError):
    """The run failed after pre-flight; it is stored as failed (``run_id``) when a db was given."""

    def __init__(self, reason: str, run_id: int | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.run_id = run_id


@dataclass
class BenchmarkResult:
    """What a run stores: its figures, provenance, every request's stamps, accuracy and side series."""

    run_id: int | None
    metrics: JSONObject
    provenance: JSONObject
    requests: list[RequestRecord]
    quality: JSONObject | None = None
    series: dict[str, JSONObject] = field(default_factory=dict)  # side records by kind (storage/series.py)

    def add_accuracy(self, quality: JSONObject) -> None:
        """The accuracy phase's result, and its time beside the other phase times."""
        self.quality = quality
        self.metrics["quality_s"] = quality.get("timings_s", {}).get("total_s")


@dataclass
class _Measured:
    """Everything the warm-up and measured phases observed, before it becomes the result."""

    phases: Measured
    warm: list[RequestRecord]
    warmup_s: float
    load: JSONObject  # configured vs achieved rate, concurrency (of the last trial)
    rss_peak: int | None
    machine: provenance.NoiseSampler
    tele: telemetry.TelemetrySampler  # the device telemetry sampler
    server: server_metrics.ServerScraper  # the server /metrics scraper
    cpu_wall_ratio: float
    client: list[ClientSample] = field(
        default_factory=list
    )  # each measured phase's ClientSample of every client process
    due_times: bool = False  # the requests had due times (an open arrival process or a trace)
    processes: int = 1  # client processes that sent (1: the backend itself)
    client_processes: JSONObject = field(default_factory=dict)  # what they said about themselves


def execute(
    spec: JobSpec,
    state: ProgressState,
    log: Callable[[str], None] = print,
    launcher: LauncherFactory | None = None,
    held: HeldLoad | None = None,
) -> BenchmarkResult:
    """Load (or reuse ``held``'s load, where the engine allows it), warm up and measure; raises on failure (nothing
    stored here).

    A tensor-parallel recipe runs here as rank 0, with the other ranks launched around it
    (engine/run/tensor_parallel.py); they run this same function on the same spec.
    """
    from engine.run import tensor_parallel

    if tensor_parallel.world_size(spec) > 1 and not tensor_parallel.is_follower():
        return tensor_parallel.run_with_followers(spec, lambda: _execute(spec, state, log, launcher), log)
    return _execute(spec, state, log, launcher, held if held is not None and holds_loads(spec) else None)


def _serving(spec: JobSpec) -> bool:
    """Whether the run reports its load (arrival process, rates, concurrency): serving engines and arrivals."""
    from engine.spec import engines

    wl = spec.workload
    return engines.get(spec.recipe.engine).capabilities.serving or wl.arrival != "batch" or wl.traffic.scheduled


def _plan(spec: JobSpec, loaded: Loaded) -> RequestPlan:
    """The job's requests, from the workload's request source, checked against the model's context."""
    from engine.run.sources import PlanContext, plan_requests

    report = loaded.report
    ctx = PlanContext(loaded.backend.tokenizer(), report.vocab_size or 32000, report.context_length)
    return plan_requests(spec.workload, ctx)


def _warm_up(
    spec: JobSpec, sender: Sender, plan: RequestPlan, state: ProgressState
) -> tuple[list[RequestRecord], float]:
    """The warm-up phase (excluded from every figure); its records and seconds."""
    from engine.run.driver import drive_phase

    state.tokens_total = sum(p.output_tokens for p in plan.warmup)
    state.requests_total = len(plan.warmup)
    state.enter("warm-up", f"{len(plan.warmup)} warm-up request(s)")
    t0 = time.perf_counter()
    warm = drive_phase(sender, plan.warmup, spec.workload, state, warmup=True).records
    return warm, time.perf_counter() - t0


def _measure(
    spec: JobSpec,
    backend: Backend,
    sender: Sender,
    plan: RequestPlan,
    state: ProgressState,
    log: Callable[[str], None],
    sample_rss: bool = True,
) -> _Measured:
    """Warm up, then the measured phase (its trials or rounds) with every sampler beside it (the RSS
    sampler only where ``sample_rss``: not for a server the job does not manage). ``sender`` sends the requests:
    the backend itself, or client processes for it."""
    from engine.run import repeats
    from engine.run.driver import drive_phase

    wl = spec.workload
    warm, warmup_s = _warm_up(spec, sender, plan, state)
    state.tokens_done, state.requests_done = 0, 0
    per_round = sum(p.output_tokens for p in plan.measured)
    state.tokens_total, state.requests_total = per_round * wl.trials, len(plan.measured) * wl.trials
    state.enter("measuring", repeats.measuring_note(wl))
    memory.release_freed_memory()  # freed load-time buffers are not the recipe's memory
    backend.measuring_started()  # counters (CUDA peak, speculation) restart: the measured phase only
    load: JSONObject = {}
    client: list[ClientSample] = []

    def run_phase(_trial: int, first_index: int, count: int) -> tuple[list[RequestRecord], int, int]:
        state.requests_total = max(state.requests_total, state.requests_done + count)
        state.tokens_total = max(
            state.tokens_total, state.tokens_done + sum(p.output_tokens for p in plan.measured[:count])
        )
        phase = drive_phase(
            sender, plan.measured[:count], wl, state, False, first_index, plan.chat_ids, plan.think_time_s
        )
        load.update(phase.stats)
        client.extend(phase.client)
        return phase.records, phase.start_ns, phase.end_ns

    ru0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with (
        telemetry.phase_samplers(spec.device, lambda: state.requests_done, sample_rss) as (rss, machine, tele),
        server_metrics.ServerScraper(backend.traits().metrics_url) as server,
    ):  # RSS, device telemetry; a serving engine's /metrics every 500 ms
        phases = repeats.measure(wl, run_phase, first_index=len(plan.warmup), per_round=len(plan.measured))
    ru1, wall1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    if phases.stopped_because:
        log(f"measured {len(phases.records)} requests in {len(phases.repeats)} rounds: {phases.stopped_because}")
    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    ratio, due = cpu_s / max(wall1 - wall0, 1e-9), load.get("arrival") in DUE_ARRIVALS
    return _Measured(phases, warm, warmup_s, load, rss.peak_bytes, machine, tele, server, ratio, client, due)


def _result(spec: JobSpec, loaded: Loaded, plan: RequestPlan, m: _Measured, prov: JSONObject) -> BenchmarkResult:
    """The run's result, assembled in this one place from what the phases observed."""
    from engine.run import noise, repeats
    from engine.run.driver import slo_of

    report, backend = loaded.report, loaded.backend
    wl = spec.workload
    metrics = repeats.repeat_metrics(m.phases, m.warm, slo_of(wl), wl.until_metric, due_times=m.due_times)
    serving = _serving(spec)
    metrics.update(
        **({"load": m.load} if serving else {}),
        **({"client": client_group(m.client, m.phases.records, m.processes)} if serving and m.client else {}),
        **memory.peak_metrics(backend.peak_memory(), m.rss_peak),
        weights_memory_bytes=report.weights_memory_bytes,
        load_s=report.load_s,
        warmup_s=m.warmup_s,
        output_tokens_per_s_per_gpu=per_gpu(metrics.get("output_tokens_per_s"), spec.device),
        **m.tele.energy_metrics(int(metrics.get("total_output_tokens") or 0)),  # J per ok token
    )
    turns = per_turn(m.phases.records)
    if turns is not None:  # multi-turn sessions: TTFT by turn (a prefix cache shows as TTFT falling over turns)
        metrics["turns"] = turns
    metrics["noise_flags"] = noise.noise_flags(m.machine.samples, metrics, spec.recipe.engine)
    provenance_ = {
        **prov,
        **backend.info(),
        **m.server.notes(),
        "model_label": loaded.resolved.label,
        "parameters": report.parameters,
        "has_accuracy": loaded.resolved.has_accuracy,
        "gguf_source": loaded.resolved.gguf_source,
        "load_avg_after": list(os.getloadavg()),
        "cpu_wall_ratio": m.cpu_wall_ratio,
        "noise": m.machine.samples,
        "request_source": {"name": plan.source, **plan.facts},
        **({"client_processes": m.client_processes} if m.client_processes else {}),
    }
    requests = m.warm + m.phases.records
    series = {
        **m.server.series(),
        "telemetry": m.tele.series(),
        aggregates.KIND: aggregates.summarise(requests).to_json(),
    }
    if _serving(spec):  # was the server saturated? (engine/measure/saturation.py)
        series.update(saturation.side_record(m.load, m.phases.records, series.get("server_metrics")))
    return BenchmarkResult(None, metrics, provenance_, requests, series=series)


def _execute(
    spec: JobSpec,
    state: ProgressState,
    log: Callable[[str], None],
    launcher: LauncherFactory | None = None,
    held: HeldLoad | None = None,
) -> BenchmarkResult:
    prov = provenance.collect()
    loaded = load(spec, state, log) if held is None else load_or_reuse(spec, state, log, held)
    keep = False
    try:
        plan = _plan(spec, loaded)
        with sending(spec, loaded.backend, log, launcher) as out:  # the backend, or client processes for it
            remote = loaded.report.device_name == REMOTE_DEVICE  # its memory is not the job's tree's
            measured = _measure(spec, loaded.backend, out.sender, plan, state, log, sample_rss=not remote)
        measured.processes, measured.client_processes = out.processes, out.info
        result = _result(spec, loaded, plan, measured, prov)
        check_failures(spec, result, log)  # before any accuracy phase: a rejected run is not scored
        measured_prompts = [p.request.prompt for p in plan.measured]
        result.series.update(profile_phase(spec, loaded.backend, measured_prompts, state, log))  # after measuring
        if spec.quality.enabled:  # after the latency numbers are taken; timed apart
            result.add_accuracy(_evaluate(spec, loaded, measured_prompts, state, log))
        if held is not None:  # load_s stays the load's own time; the run says it did not load
            result.provenance["load_shared"] = {"run_on_load": held.runs, "first": held.runs == 1}
            keep = True
        return result
    finally:
        if held is not None and not keep:
            held.loaded = None  # a failed run's engine is not trusted with the next one
        if not keep:
            loaded.backend.unload()


def _evaluate(
    spec: JobSpec, loaded: Loaded, prompts: list[list[int]], state: ProgressState, log: Callable[[str], None]
) -> JSONObject:
    """The evaluating phase: accuracy of the same recipe through the same backend."""
    from engine.accuracy import evaluate

    def load_reference() -> Backend:
        ref = get_backend(spec.recipe.engine)
        ref.load(
            loaded.resolved,
            evaluate.reference_recipe(spec.recipe),
            spec.device,
            lambda msg, _f: setattr(state, "note", msg),
        )
        return ref

    state.tokens_done, state.tokens_total, state.requests_done, state.requests_total = 0, 0, 0, 0
    state.enter("evaluating", ", ".join(spec.quality.metrics))
    t0 = time.perf_counter()
    result = evaluate.evaluate(
        spec, loaded.backend, loaded.resolved, prompts, state, log, loaded.report.context_length, load_reference
    )
    result.setdefault("timings_s", {})["total_s"] = time.perf_counter() - t0
    log(f"accuracy: {evaluate.summary_line(result)} ({result['timings_s']['total_s']:.1f} s)")
    return result


def per_gpu(tokens_per_s: float | None, device: str) -> float | None:
    """Output tokens/s divided by the GPUs the job used; None on the CPU."""
    if tokens_per_s is None or not device.startswith("cuda:"):
        return None
    return tokens_per_s / len(device.split(":", 1)[1].split(","))


def run_benchmark(
    spec: JobSpec,
    db: Database | None = None,
    state: ProgressState | None = None,
    log: Callable[[str], None] = print,
    job_id: int | None = None,
    sweep: str | None = None,
    worker_id: str | None = None,
    launcher: LauncherFactory | None = None,
    held: HeldLoad | None = None,
) -> BenchmarkResult:
    """Pre-flight, execute and store. SpecError before anything is stored; BenchmarkFailed after.

    Bad input found only once the model is loaded (a malformed row deep in a dataset or a trace,
    a prompt beyond the context) is a SpecError too, and nothing is stored. The input file's
    content hash joins the spec (:func:`engine.run.sources.pinned`), so the run's fingerprint
    names the data it read.

    With ``job_id`` and ``worker_id`` (a job's process), the run is stored only while that
    worker still holds the job; a late result raises :class:`storage.ClaimLost`, nothing stored.
    ``launcher`` places client processes on the spec's load nodes (``--load-nodes``): the caller hands down
    ``engine.jobs.ray_load.RayLauncher``, which this layer never imports. ``held``: a load kept for several runs
    (:class:`HeldLoad`), where the engine allows it.
    """
    from engine.run.sources import pinned

    preflight(spec)
    spec = pinned(spec)
    state = state or ProgressState()
    where = Where(db, spec, job_id, sweep, worker_id)
    try:
        result = execute(spec, state, log, launcher, held)
    except (KeyboardInterrupt, SpecError):
        raise
    except RunRejected as exc:  # the phase ran: keep its metrics and every request's reason
        reason = str(exc)
        got = exc.result
        run_id = where.store("failed", got.metrics, got.provenance, got.requests, reason, series=got.series)
        raise BenchmarkFailed(reason, run_id) from exc
    except Exception as exc:  # every failure becomes a stored reason (re-raised below)
        reason = failure_reason(exc)
        log(traceback.format_exc())
        run_id = where.store("failed", None, {"error_type": type(exc).__name__}, [], reason)
        raise BenchmarkFailed(reason, run_id) from exc
    state.enter("saving")
    result.run_id = where.store(
        "done", result.metrics, result.provenance, result.requests, None, result.quality, result.series
    )
    state.enter("done")
    return result
