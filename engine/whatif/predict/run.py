"""A predicted run: a job's spec served by the simulator on a hardware entry, as a run to store.

:func:`prepare` checks everything a prediction needs before anything is fitted or stored, each problem in
one line (:class:`PredictError`): the engine and recipe modelled, the request plan made here, the
weights fitting the hardware's memory per GPU, every request fitting the KV space. :func:`predict`
simulates the plan under a calibration (:mod:`engine.whatif.predict.calibration`) and computes the
metrics with the project's own metric code; :func:`new_run` gives what storage keeps: the spec, every
request's records, the metrics, the aggregates the Run page draws from, and the provenance's
``prediction`` (hardware key and name, tensor parallelism, calibration label, band, step costs, the
simulated engine's statistics). Predicted runs are marked (``NewRun.predicted``) and every listing of
measured runs leaves them out.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.measure import aggregates
from engine.measure.energy import energy_metrics
from engine.measure.records import RequestRecord
from engine.run.plan import RequestPlan
from engine.spec import JobSpec
from engine.whatif.hardware import Hardware
from engine.whatif.memory import weights_bytes
from engine.whatif.predict.calibration import Calibrated
from engine.whatif.predict.deployment import NotModelled, deployment, with_acceptance
from engine.whatif.predict.replay import Case, PlanUnavailable, case_metrics, case_of, case_records, simulate_case
from engine.whatif.serving import ConfigError, DoesNotFit, StepCosts, StepModel, kv_capacity
from engine.whatif.serving.config import blocks_needed
from engine.whatif.serving.result import SimResult
from engine.whatif.shapes import EstimateError, model_shape

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from storage.runs import NewRun

GB = 1e9
NOT_PREDICTED = "not predicted (the serving simulator predicts latency and throughput only)"


class PredictError(ValueError):
    """A prediction that cannot be made; the message is one line naming what is wrong (or does not fit)."""


@dataclass(frozen=True, eq=False)
class Setup:
    """A spec ready to simulate on a hardware entry: its deployment there and its requests."""

    spec: JobSpec
    hardware: Hardware
    case: Case

    @property
    def tp(self) -> int:
        return self.case.deployment.tp


def _check_fits(case: Case, hardware: Hardware) -> None:
    dep = case.deployment
    config, served = dep.config, dep.served
    StepModel(served, config.tensor_parallel, StepCosts())  # ConfigError: heads not divisible, no interconnect
    weights = weights_bytes(served.shape, served.precisions.weight) / config.tensor_parallel
    if weights > hardware.memory_bytes:
        raise DoesNotFit(
            f"weights of {weights / GB:.1f} GB per device do not fit {hardware.name}'s {hardware.memory_gb:g} GB "
            f"at tensor parallel {config.tensor_parallel}"
        )
    capacity = kv_capacity(config, served)
    for r in case.requests:
        if r.later_turn:
            continue
        need = blocks_needed(r.prompt_tokens, r.output_tokens, config)
        if need > capacity.num_blocks:
            raise DoesNotFit(
                f"request {r.index}: a prompt of {r.prompt_tokens} tokens plus {r.output_tokens} output tokens needs "
                f"{need} KV blocks of {config.block_size} tokens; {hardware.name} holds {capacity.num_blocks} "
                f"({capacity.tokens(config.block_size):,} tokens of KV space)"
            )


def prepare(
    spec: JobSpec, hardware: Hardware, tp: int | None = None, acceptance: float = 0.0, plan: RequestPlan | None = None
) -> Setup:
    """The spec's deployment on ``hardware`` and its requests (``plan``'s, else planned here), checked to fit;
    :class:`PredictError` in one line."""
    try:
        shape = model_shape(spec.model.source)
        dep = deployment(spec, hardware, shape, tp, acceptance)
        case = case_of(spec, dep, plan)
        _check_fits(case, hardware)
    except (NotModelled, PlanUnavailable, ConfigError, DoesNotFit, EstimateError) as exc:
        raise PredictError(str(exc)) from exc
    return Setup(spec, hardware, case)


@dataclass(frozen=True, eq=False)
class Prediction:
    """A simulated phase: the engine's result, the records and metrics of a measured run, and how long it took."""

    setup: Setup
    calibration: Calibrated
    result: SimResult
    records: list[RequestRecord]
    metrics: JSONObject
    wall_s: float

    def prediction(self) -> JSONObject:
        """The provenance's ``prediction``: what was predicted where, from which calibration, how sure."""
        hw, dep = self.setup.hardware, self.setup.case.deployment
        return {
            "hardware": hw.key,
            "hardware_name": hw.name,
            "tp": dep.tp,
            **self.calibration.to_dict(),
            "server": {
                "max_num_seqs": dep.config.max_num_seqs,
                "max_num_batched_tokens": dep.config.max_num_batched_tokens,
                "block_size": dep.config.block_size,
                "prefix_caching": dep.config.prefix_caching,
                "chunked_prefill": dep.config.chunking,
                "kv_blocks": self.result.capacity.num_blocks,
                "static_batches": dep.config.static_batches,
                "spec_tokens": dep.config.spec_tokens,
                "spec_acceptance": dep.config.spec_acceptance,
            },
            "terms": dep.terms.words,
            "simulation": {**self.result.stats.to_dict(), "wall_s": round(self.wall_s, 3)},
        }


def _load_group(case: Case, records: list[RequestRecord], end_ns: int) -> JSONObject:
    """The serving load as a measured run's ``load`` group says it (the simulated client never lags)."""
    arrivals, n = case.arrivals, len(records)
    sends = sorted(r.send_ns for r in records)
    kind = "trace" if any(r.due_s is not None for r in case.requests) else arrivals.kind
    return {
        "arrival": kind,
        "configured_rate": arrivals.rate if kind in ("poisson", "gamma") else None,
        "achieved_rate": (n / (sends[-1] / 1e9)) if n > 1 and sends[-1] > 0 else None,
        "max_concurrency": arrivals.max_concurrency,
        "burstiness": arrivals.burstiness if kind == "gamma" else None,
        "duration_s": end_ns / 1e9,
    }


def predict(setup: Setup, calibration: Calibrated) -> Prediction:
    """Simulate the setup's requests under the calibration's costs (its measured acceptance where it has one)."""
    case = setup.case
    fit = calibration.fit
    if fit is not None and fit.acceptance is not None:
        case = Case(
            case.spec, case.requests, case.arrivals, with_acceptance(case.deployment, fit.acceptance), case.source
        )
    t0 = time.perf_counter()
    result = simulate_case(case, calibration.costs)
    records, start, end = case_records(case, result)
    metrics = case_metrics(case, records, start, end, result.due_times)
    metrics["load"] = _load_group(case, records, end)
    metrics["noise_flags"] = []
    metrics.update(energy_metrics(None, 0.0, 0, None, NOT_PREDICTED))
    metrics.update(weights_memory_bytes=None, peak_memory_bytes=None, load_s=None)
    return Prediction(
        Setup(setup.spec, setup.hardware, case), calibration, result, records, metrics, time.perf_counter() - t0
    )


def device_name(hardware: Hardware, tp: int) -> str:
    """``NVIDIA H100 SXM``, or ``2 x NVIDIA H100 SXM`` for a tensor-parallel group."""
    return hardware.name if tp == 1 else f"{tp} x {hardware.name}"


def new_run(p: Prediction) -> NewRun:
    """What storage keeps of a predicted run (a :class:`storage.runs.NewRun` marked predicted)."""
    from storage.runs import NewRun

    spec, hw = p.setup.spec, p.setup.hardware
    provenance = {
        "prediction": p.prediction(),
        "host": socket.gethostname(),
        "request_source": p.setup.case.source,
        "device_name": device_name(hw, p.setup.tp),
    }
    return NewRun(
        status="done",
        spec=spec.model_dump(mode="json"),
        fingerprint=spec.fingerprint(),
        model=spec.model.source,
        engine=spec.recipe.engine,
        device=hw.key,
        device_name=device_name(hw, p.setup.tp),
        name=spec.name,
        provenance=provenance,
        metrics=p.metrics,
        requests=p.records,
        series={aggregates.KIND: aggregates.summarise(p.records).to_json()},
        predicted=True,
    )
