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
from typing import Any

from engine.backends.base import GenerationParams, get_backend
from engine.measure import memory, provenance, server_metrics, telemetry
from engine.measure.records import RequestRecord
from engine.run.failures import RunRejected, check_failures, failure_reason
from engine.run.preflight import preflight
from engine.run.profile import profile_phase
from engine.spec import JobSpec, SpecError
from engine.weights import models

PHASES: tuple[str, ...] = ("loading", "warm-up", "measuring", "evaluating", "saving")


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
    run_id: int | None
    metrics: dict[str, Any]
    provenance: dict[str, Any]
    requests: list[RequestRecord]
    quality: dict[str, Any] | None = None
    series: dict[str, dict[str, Any]] = field(default_factory=dict)  # side records by kind (storage/series.py)


class _Sink:
    """Appends each chunk to its request; the only code in the measuring hot path."""

    __slots__ = ("chunk_ns", "chunk_tokens", "state")

    def __init__(self, records: list[RequestRecord], state: ProgressState) -> None:
        self.chunk_ns = [r.chunk_ns for r in records]
        self.chunk_tokens = [r.chunk_tokens for r in records]
        self.state = state

    def chunk(self, row: int, t_ns: int, n_tokens: int) -> None:
        self.chunk_ns[row].append(t_ns)
        self.chunk_tokens[row].append(n_tokens)
        self.state.tokens_done += n_tokens


def _serving(spec: JobSpec) -> bool:
    """Whether the load driver (engine/run/load.py) runs this job instead of the static-batch loop."""
    from engine.spec import engines

    return engines.get(spec.recipe.engine).capabilities.serving or spec.workload.arrival != "batch"


def _batches(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def _run_requests(
    backend: Any, prompts: list[list[int]], spec: JobSpec, state: ProgressState, warmup: bool, first_index: int
) -> tuple[list[RequestRecord], int, int]:
    """Send ``prompts`` in static batches; returns records and the phase's bounds."""
    wl = spec.workload
    params = GenerationParams(max_new_tokens=wl.output_tokens, ignore_eos=wl.ignore_eos)
    start_ns = time.perf_counter_ns()
    records: list[RequestRecord] = []
    for batch in _batches(len(prompts), wl.batch_size):
        batch_records = [
            RequestRecord(
                index=first_index + i, arrival_ns=start_ns, send_ns=0, prompt_tokens=len(prompts[i]), warmup=warmup
            )
            for i in batch
        ]
        sink = _Sink(batch_records, state)
        send_ns = backend.generate([prompts[i] for i in batch], params, sink)
        for r in batch_records:
            r.send_ns = send_ns
        records.extend(batch_records)
        state.requests_done += len(batch)
    end_ns = time.perf_counter_ns()
    return records, start_ns, end_ns


def execute(spec: JobSpec, state: ProgressState, log: Callable[[str], None] = print) -> BenchmarkResult:
    """Load, warm up and measure; raises on failure (nothing stored here).

    A tensor-parallel recipe runs here as rank 0, with the other ranks launched around it
    (engine/run/tensor_parallel.py); they run this same function on the same spec.
    """
    from engine.run import tensor_parallel

    if tensor_parallel.world_size(spec) > 1 and not tensor_parallel.is_follower():
        return tensor_parallel.run_with_followers(spec, lambda: _execute(spec, state, log), log)
    return _execute(spec, state, log)


def _load(spec: JobSpec, state: ProgressState, log: Callable[[str], None]) -> tuple[Any, Any, Any]:
    """The loading phase: resolve the weights and load them; (resolved, backend, load report)."""
    state.enter("loading", "resolving weights")
    resolved = models.resolve(spec.model, progress=lambda msg, _f: (log(msg), setattr(state, "note", msg)))
    backend = get_backend(spec.recipe.engine)
    report = backend.load(resolved, spec.recipe, spec.device, lambda msg, _f: setattr(state, "note", msg))
    log(f"loaded {resolved.label} in {report.load_s:.1f} s on {report.device_name}")
    return resolved, backend, report


def _prompts(spec: JobSpec, backend: Any, report: Any) -> list[list[int]]:
    """Warm-up and measured prompts (exact lengths or drawn from the workload), checked against the context."""
    from engine.run.load import make_serving_prompts

    wl = spec.workload
    context = report.context_length
    if context is not None and wl.prompt_tokens is not None and wl.prompt_tokens + wl.output_tokens > context:
        raise SpecError(f"prompt + output tokens exceed the model's context of {context}")
    prompts = make_serving_prompts(wl, wl.warmup + wl.requests, backend.tokenizer(), report.vocab_size or 32000)
    if context is not None and any(len(p) + wl.output_tokens > context for p in prompts):
        raise SpecError(f"a prompt from {wl.prompt_file} plus the output exceeds the model's context of {context}")
    return prompts


def _warm_up(
    spec: JobSpec, backend: Any, prompts: list[list[int]], state: ProgressState, serving: bool
) -> tuple[list[RequestRecord], float]:
    """The warm-up phase (excluded from every figure); its records and seconds."""
    from engine.run.load import run_load

    wl = spec.workload
    state.tokens_total = wl.warmup * wl.output_tokens
    state.requests_total = wl.warmup
    state.enter("warm-up", f"{wl.warmup} warm-up request(s)")
    t0 = time.perf_counter()
    if serving:
        params = GenerationParams(max_new_tokens=wl.output_tokens, ignore_eos=wl.ignore_eos)
        warm = run_load(backend, prompts[: wl.warmup], wl, params, state, warmup=True).records
    else:
        warm, _, _ = _run_requests(backend, prompts[: wl.warmup], spec, state, True, 0)
    return warm, time.perf_counter() - t0


def _phase_runner(
    spec: JobSpec, backend: Any, prompts: list[list[int]], state: ProgressState, serving: bool, load: dict[str, Any]
) -> Callable[[int, int, int], tuple[list[RequestRecord], int, int]]:
    """One measured phase (a trial) of ``count`` of the measured prompts; serving stats land in ``load``."""
    from engine.run.load import run_load

    wl = spec.workload
    params = GenerationParams(max_new_tokens=wl.output_tokens, ignore_eos=wl.ignore_eos)
    measured = prompts[wl.warmup :]

    def run(_trial: int, first_index: int, count: int) -> tuple[list[RequestRecord], int, int]:
        state.requests_total = max(state.requests_total, state.requests_done + count)
        state.tokens_total = max(state.tokens_total, state.tokens_done + count * wl.output_tokens)
        if serving:
            phase = run_load(backend, measured[:count], wl, params, state, first_index=first_index)
            load.update(phase.stats)  # configured vs achieved rate, concurrency (of the last trial)
            return phase.records, phase.start_ns, phase.end_ns
        return _run_requests(backend, measured[:count], spec, state, False, first_index)

    return run


def _execute(spec: JobSpec, state: ProgressState, log: Callable[[str], None]) -> BenchmarkResult:
    from engine.run import noise, trials

    wl = spec.workload
    prov = provenance.collect()
    resolved, backend, report = _load(spec, state, log)
    try:
        from engine.run.load import slo_of

        serving = _serving(spec)  # arrival processes and streaming engines go through engine/run/load.py
        prompts = _prompts(spec, backend, report)
        warm, warmup_s = _warm_up(spec, backend, prompts, state, serving)
        state.tokens_done, state.requests_done = 0, 0
        state.tokens_total, state.requests_total = wl.requests * wl.output_tokens * wl.trials, wl.requests * wl.trials
        state.enter("measuring", trials.measuring_note(wl))
        memory.release_freed_memory()  # freed load-time buffers are not the recipe's memory
        backend.measuring_started()  # counters (CUDA peak, speculation) restart: the measured phase only
        load: dict[str, Any] = {}
        run_phase = _phase_runner(spec, backend, prompts, state, serving, load)
        ru0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        with (
            telemetry.phase_samplers(spec.device, lambda: state.requests_done) as (rss, machine, tele),
            server_metrics.ServerScraper(getattr(backend, "metrics_url", None)) as server,
        ):  # RSS, device telemetry; a serving engine's /metrics every 500 ms
            measured = trials.measure(wl, run_phase, first_index=wl.warmup)
        ru1, wall1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if measured.stopped_because:
            log(
                f"measured {len(measured.records)} requests in {len(measured.trials)} rounds: {measured.stopped_because}"
            )
        # goodput against the workload's SLOs (none: goodput is None, "no SLO set")
        metrics = trials.trial_metrics(measured, warm, slo_of(wl), wl.until_metric)
        if serving:
            metrics["load"] = load
        metrics.update(memory.peak_metrics(backend.peak_memory(), rss.peak_bytes))
        metrics.update(weights_memory_bytes=report.weights_memory_bytes, load_s=report.load_s, warmup_s=warmup_s)
        metrics["output_tokens_per_s_per_gpu"] = per_gpu(metrics.get("output_tokens_per_s"), spec.device)
        metrics["noise_flags"] = noise.noise_flags(machine.samples, metrics)
        metrics.update(tele.energy_metrics(int(metrics.get("total_output_tokens") or 0)))  # J per ok token
        cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        prov.update(
            {**backend.info(), **server.notes()},
            model_label=resolved.label,
            parameters=report.parameters,
            has_accuracy=resolved.has_accuracy,
            gguf_source=resolved.gguf_source,
            load_avg_after=list(os.getloadavg()),
            cpu_wall_ratio=cpu_s / max(wall1 - wall0, 1e-9),
            noise=machine.samples,
        )
        result = BenchmarkResult(None, metrics, prov, warm + measured.records, series=server.series())
        result.series["telemetry"] = tele.series()
        check_failures(spec, result, log)  # before any accuracy phase: a rejected run is not scored
        result.series.update(profile_phase(spec, backend, prompts[wl.warmup :], state, log))  # after measuring
        if spec.quality.enabled:  # after the latency numbers are taken; timed apart
            result.quality = _evaluate(spec, backend, resolved, prompts[wl.warmup :], state, log, report)
            metrics["quality_s"] = result.quality.get("timings_s", {}).get("total_s")
        return result
    finally:
        backend.unload()


def _evaluate(
    spec: JobSpec,
    backend: Any,
    resolved: Any,
    prompts: list[list[int]],
    state: ProgressState,
    log: Callable[[str], None],
    report: Any,
) -> dict[str, Any]:
    """The evaluating phase: accuracy of the same recipe through the same backend."""
    from engine.accuracy import evaluate

    def load_reference() -> Any:
        ref = get_backend(spec.recipe.engine)
        ref.load(
            resolved, evaluate.reference_recipe(spec.recipe), spec.device, lambda msg, _f: setattr(state, "note", msg)
        )
        return ref

    state.tokens_done, state.tokens_total, state.requests_done, state.requests_total = 0, 0, 0, 0
    state.enter("evaluating", ", ".join(spec.quality.metrics))
    t0 = time.perf_counter()
    result = evaluate.evaluate(spec, backend, resolved, prompts, state, log, report.context_length, load_reference)
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
    db: Any | None = None,
    state: ProgressState | None = None,
    log: Callable[[str], None] = print,
    job_id: int | None = None,
    sweep: str | None = None,
    worker_id: str | None = None,
) -> BenchmarkResult:
    """Pre-flight, execute and store. SpecError before anything is stored; BenchmarkFailed after.

    With ``job_id`` and ``worker_id`` (a job's process), the run is stored only while that
    worker still holds the job; a late result raises :class:`storage.ClaimLost`, nothing stored.
    """
    preflight(spec)
    state = state or ProgressState()
    where = _Where(db, spec, job_id, sweep, worker_id)
    try:
        result = execute(spec, state, log)
    except KeyboardInterrupt:
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


@dataclass(frozen=True)
class _Where:
    """Where a run is stored: the database, its spec and, for a job, the job and its worker."""

    db: Any | None
    spec: JobSpec
    job_id: int | None
    sweep: str | None
    worker_id: str | None

    def store(
        self,
        status: str,
        metrics: dict[str, Any] | None,
        prov: dict[str, Any],
        requests: list[RequestRecord],
        error: str | None,
        quality: dict[str, Any] | None = None,
        series: dict[str, dict[str, Any]] | None = None,
    ) -> int | None:
        """Save the run (one transaction); its id, or None without a database."""
        if self.db is None:
            return None
        from storage.runs import save_run

        run = new_run(self.spec, status, error, job_id=self.job_id, device_name=prov.get("device_name"))
        run.sweep, run.provenance, run.metrics, run.quality = self.sweep, prov, metrics, quality
        run.requests, run.worker_id, run.series = requests, self.worker_id, dict(series or {})
        return save_run(self.db, run)


def new_run(spec: JobSpec, status: str, error: str | None, **extra: Any) -> Any:
    """A :class:`storage.runs.NewRun` for ``spec`` (identity from the spec; figures filled in by the caller)."""
    from storage.runs import NewRun

    return NewRun(
        status=status,
        spec=spec.model_dump(mode="json"),
        fingerprint=spec.fingerprint(),
        model=spec.model.label,
        engine=spec.recipe.engine,
        device=spec.device,
        name=spec.name,
        error=error,
        **extra,
    )
