"""The serving what-if: a step-level simulator of a continuous-batching server (vLLM v1's
scheduler semantics), pure Python and numpy.

``simulate(requests, config, served, costs, arrivals)`` serves a job's own request plan
(:func:`requests_from_plan`) and returns a :class:`SimResult`; :func:`to_records` turns it into
the records a measured run has, for the project's metric code. See ARCHITECTURE.md, "The serving
simulator".
"""

from engine.whatif.serving.client import Arrivals, arrivals_of
from engine.whatif.serving.config import (
    ConfigError,
    DoesNotFit,
    KvCapacity,
    Precisions,
    Served,
    ServerConfig,
    kv_capacity,
)
from engine.whatif.serving.requests import SimRequest, requests_from_plan, sim_request
from engine.whatif.serving.result import RequestOutcome, RunStats, SimResult, to_records, to_run_record
from engine.whatif.serving.simulator import simulate
from engine.whatif.serving.steptime import IDEAL, StepBatch, StepCosts, StepModel, step_time

__all__ = [
    "IDEAL",
    "Arrivals",
    "arrivals_of",
    "ConfigError",
    "DoesNotFit",
    "KvCapacity",
    "Precisions",
    "RequestOutcome",
    "RunStats",
    "ServerConfig",
    "Served",
    "SimRequest",
    "SimResult",
    "StepBatch",
    "StepCosts",
    "StepModel",
    "kv_capacity",
    "requests_from_plan",
    "sim_request",
    "simulate",
    "step_time",
    "to_records",
    "to_run_record",
]
