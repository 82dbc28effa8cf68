"""Seeding for what-if tests: a measured test CPU, and runs of one model with real job specs
whose latencies follow known factors, next to runs of recipes the estimator does not model."""

from __future__ import annotations

from typing import Any

from engine.spec import parse_job_spec
from engine.whatif.estimate import EstimateRecipe, Factors, model_shape, phase_times, work
from engine.whatif.hardware import Hardware

CPU = Hardware(
    key="local:cpu",
    name="Test CPU (local, measured)",
    vendor="local",
    kind="cpu",
    memory_gb=32,
    bandwidth_gbs=20,
    tflops={"fp32": 0.2},
    measured=True,
)
TRUE = Factors(
    eff_bandwidth=0.45,
    eff_compute_prefill=0.6,
    eff_compute_decode=0.35,
    step_overhead_ms=12.0,
    prefill_overhead_ms=30.0,
)
GRID = [(b, p) for b in (1, 4, 16, 64) for p in (32, 256, 1024)]


def truth(model: str, batch: int, prompt: int, output: int = 16, drop_layers: int = 0) -> tuple[float, float]:
    """(TTFT ms, TPOT ms) the TRUE factors give on the test CPU."""
    recipe = EstimateRecipe(dtype="fp32", batch_size=batch, drop_layers=drop_layers)
    ttft, tpot, _, _ = phase_times(work(model_shape(model), CPU, recipe, prompt, output, batch), TRUE)
    return ttft * 1e3, tpot * 1e3


def save_cpu_measurement(db: Any, host: str = "testhost", memory_bytes: int = 32_000_000_000) -> int:
    """The test CPU's micro-benchmark (20 GB/s, 0.2 TFLOP/s fp32)."""
    from storage.hardware import NewMeasurement, save_measurement

    return save_measurement(
        db,
        NewMeasurement(
            host=host,
            device="cpu",
            device_name="Test CPU",
            copy_gbs=20.0,
            matmul_tflops={"fp32": 0.2},
            duration_s=1.0,
            memory_bytes=memory_bytes,
        ),
    )


def save_timed_run(
    db: Any,
    ttft_tpot: tuple[float, float],
    model: str = "demo",
    batch: int = 1,
    prompt: int = 32,
    output: int = 16,
    recipe: dict[str, Any] | None = None,
    workload: dict[str, Any] | None = None,
    host: str = "testhost",
) -> int:
    """A done transformers run on the CPU with a real (validated) spec and these p50 latencies."""
    from storage.runs import NewRun, save_run

    wl = {"prompt_tokens": prompt, "output_tokens": output, "batch_size": batch, "requests": batch, **(workload or {})}
    spec = parse_job_spec(
        {"model": {"source": model}, "recipe": {"engine": "transformers", **(recipe or {})}, "workload": wl}
    )
    return save_run(
        db,
        NewRun(
            status="done",
            spec=spec.model_dump(mode="json"),
            fingerprint=spec.fingerprint(),
            model=model,
            engine="transformers",
            device="cpu",
            provenance={"host": host, "applied": {"dtype": "float32"}},
            metrics={"ttft_ms": {"p50": ttft_tpot[0]}, "tpot_ms": {"p50": ttft_tpot[1]}},
        ),
    )


def seed_mixed(db: Any) -> dict[str, list[int]]:
    """Plain fp32 runs and dropped-layer runs of the demo model on the GRID (both follow TRUE),
    one GPTQ 4-bit run, and speculative, Poisson-load and compiled runs at 32 prompt tokens
    whose latencies TRUE does not describe. Returns the ids by kind."""
    save_cpu_measurement(db)
    ids: dict[str, list[int]] = {"plain": [], "dropped": []}
    for b, p in GRID:
        ids["plain"].append(save_timed_run(db, truth("demo", b, p), batch=b, prompt=p))
        dropped = truth("demo", b, p, drop_layers=6)
        ids["dropped"].append(save_timed_run(db, dropped, batch=b, prompt=p, recipe={"drop_layers": 6}))
    base = truth("demo", 1, 32)
    ids["gptq"] = [save_timed_run(db, (base[0] * 3, base[1] * 2), recipe={"quantization": "gptq"})]
    ids["speculative"] = [save_timed_run(db, (base[0], base[1] / 3), recipe={"speculative": "prompt_lookup"})]
    poisson = {"arrival": "poisson", "rate": 4.0, "batch_size": 1}
    ids["poisson"] = [save_timed_run(db, (base[0] * 5, base[1]), workload=poisson) for _ in range(2)]
    compiled = {"compile": True, "cache_implementation": "static"}
    ids["compile"] = [save_timed_run(db, (base[0] * 4, base[1] / 4), recipe=compiled)]
    return ids
