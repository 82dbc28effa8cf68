"""Runs "measured" by simulating them with known step costs, for the calibration's tests (pure: no server)."""

from __future__ import annotations

from typing import Any

from engine.spec import JobSpec, parse_job_spec
from engine.whatif.hardware import Hardware
from engine.whatif.predict.deployment import deployment
from engine.whatif.predict.fitting import Pair
from engine.whatif.predict.observed import Observed
from engine.whatif.predict.replay import case_metrics, case_of, case_records, simulate_case
from engine.whatif.serving import StepCosts
from engine.whatif.shapes import model_shape

MODEL = "synthetic:smollm2-135m"  # no tokenizer needed: prompts are random token ids
CPU = Hardware(
    key="local:cpu",
    name="Test CPU (local, measured)",
    vendor="local",
    kind="cpu",
    memory_gb=32.0,
    bandwidth_gbs=20.0,
    tflops={"fp32": 0.2},
    measured=True,
)
TRUE = StepCosts(step_s=15e-3, seq_s=1e-3, arrival_s=8e-3, eff_bandwidth=0.8, eff_compute=0.3, frontend_s=2e-3)


def spec(workload: dict[str, Any], engine: str = "vllm", model: str = MODEL, **recipe: Any) -> JobSpec:
    """A job of a synthetic model (the small one by default): 64-token prompts, 16 output tokens unless the
    workload says."""
    wl = {"prompt_tokens": 64, "output_tokens": 16, "warmup_requests": 0, **workload}
    return parse_job_spec(
        {"model": {"source": model}, "recipe": {"engine": engine, **recipe}, "workload": wl, "quality": {"metrics": []}}
    )


def measured(run_id: int, job: JobSpec, costs: StepCosts = TRUE, hardware: Hardware = CPU, slower: float = 1.0) -> Pair:
    """A run as if measured: its requests served by the simulator under ``costs`` (times ``slower``)."""
    shape = model_shape(MODEL)
    case = case_of(job, deployment(job, hardware, shape))
    result = simulate_case(case, costs)
    records, start, end = case_records(case, result)
    for r in records:
        r.chunk_ns = [r.send_ns + round((t - r.send_ns) * slower) for t in r.chunk_ns]
    metrics = case_metrics(case, records, start, round(end * slower), result.due_times)
    observed = Observed(
        run_id=run_id,
        spec=job,
        terms=case.deployment.terms,
        hardware=hardware,
        shape=shape,
        records=records,
        metrics=metrics,
        counters={"steps": float(result.stats.steps)},
    )
    return Pair(observed, case)


def calibration_runs() -> list[Pair]:
    """Concurrency 1, concurrency 8 with longer prompts, and Poisson load: what a calibration is made of."""
    return [
        measured(1, spec({"requests": 8, "arrival": "concurrency", "max_concurrency": 1})),
        measured(2, spec({"requests": 24, "arrival": "concurrency", "max_concurrency": 8, "prompt_tokens": 256})),
        measured(3, spec({"requests": 30, "arrival": "poisson", "rate": 6.0, "seed": 3})),
    ]
