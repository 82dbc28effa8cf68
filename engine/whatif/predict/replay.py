"""A job's requests planned as the job plans them, served by the simulator, and given back as a run's records.

:func:`case_of` re-plans a spec's measured requests with its own request source and the model's light
tokenizer (:func:`engine.run.sources.context.plan_context`: the tokenizer Launch's preview uses and an
OpenAI-client job loads), so a stored run is simulated on exactly the requests its job sent (same
seeds, same lengths, same due times, same sessions) and a what-if on the requests a job would send.
:func:`simulate_case` serves them on the case's deployment; :func:`case_records` gives the records a
measured phase has. Where the engine blocks the client's loop (transformers), a request's send stamp is
when its batch started, as the measured records stamp it; its due time stays its arrival.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.measure.metrics import compute_metrics
from engine.measure.records import RequestRecord, RunRecord
from engine.run.driver import slo_of
from engine.run.plan import RequestPlan
from engine.spec import JobSpec, SpecError
from engine.whatif.predict.deployment import Deployment
from engine.whatif.serving import Arrivals, SimRequest, StepCosts, arrivals_of, requests_from_plan, simulate
from engine.whatif.serving.result import SimResult, to_records


class PlanUnavailable(ValueError):
    """The job's requests cannot be planned here (no tokenizer for a source that needs one, bad input): one line."""


@dataclass(frozen=True, eq=False)
class Case:
    """One phase to simulate: the requests in plan order, how the client sends them, where they are served."""

    spec: JobSpec
    requests: list[SimRequest]
    arrivals: Arrivals
    deployment: Deployment
    source: dict = field(default_factory=dict)  # the plan's source and what it counted, as a run's provenance has

    @property
    def seed(self) -> int:
        return self.spec.workload.seed


def plan_of(spec: JobSpec) -> RequestPlan:
    """The job's request plan from local files (:class:`PlanUnavailable` when it cannot be made here)."""
    from engine.run.sources import plan_requests
    from engine.run.sources.context import plan_context

    ctx, no_tokenizer = plan_context(spec.model)
    traffic = spec.workload.traffic
    if no_tokenizer and traffic.needs_tokenizer:
        raise PlanUnavailable(f"the {traffic.words()} needs the model's tokenizer: {no_tokenizer}")
    try:
        return plan_requests(spec.workload, ctx)
    except SpecError as exc:
        raise PlanUnavailable(str(exc)) from exc
    except (ValueError, OSError) as exc:
        raise PlanUnavailable(f"{traffic.words()}: {type(exc).__name__}: {exc}") from exc


def case_of(spec: JobSpec, dep: Deployment, plan: RequestPlan | None = None) -> Case:
    """The spec's measured requests (its plan, made here unless given) on ``dep``."""
    plan = plan if plan is not None else plan_of(spec)
    requests = requests_from_plan(plan, dep.config.block_size)
    source = {"name": plan.source, **plan.facts}
    return Case(spec, requests, arrivals_of(spec.workload, plan.think_time_s), dep, source)


def simulate_case(case: Case, costs: StepCosts) -> SimResult:
    """The case served under ``costs`` (:class:`~engine.whatif.serving.DoesNotFit` when it cannot run)."""
    dep = case.deployment
    return simulate(case.requests, dep.config, dep.served, costs, case.arrivals, seed=case.seed)


def _step_starts(result: SimResult) -> np.ndarray:
    """When each step started: the end of the step before (the first at 0; an idle engine's next step starts
    when a request came, which the send stamp's max takes care of)."""
    return np.concatenate(([0.0], result.step_end_s[:-1])) if len(result.step_end_s) else np.zeros(0)


def case_records(case: Case, result: SimResult) -> tuple[list[RequestRecord], int, int]:
    """The phase's records (ns from 0), start and end; a blocking engine's sends moved to their batch's start."""
    records, start, end = to_records(result)
    if not case.deployment.blocking_client:
        return records, start, end
    starts = _step_starts(result)
    for record, outcome in zip(records, result.requests, strict=True):
        if outcome.runs:
            first_step = outcome.runs[0][0]
            send = max(record.send_ns, round(float(starts[first_step]) * 1e9))
            record.send_ns = record.ready_ns = send
    return records, start, end


def case_metrics(case: Case, records: Sequence[RequestRecord], start: int, end: int, due: bool) -> dict:
    """The phase's metrics, computed by the project's own metric code, as a measured run's are."""
    return compute_metrics(RunRecord(start, end, list(records), due_times=due), slo_of(case.spec.workload))
