"""The telemetry sampler's cost: demo-model decode with and without it, alternated, and the sampler's
own CPU time per sample.

    .venv/bin/python benchmarks/telemetry_overhead.py [--pairs 6] [--requests 2] [--output-tokens 24]

Each pair measures one phase without the sampler and one with it (order alternating, ABBA,
so a slow drift of the machine cancels); the figure is the mean of the pairs' relative
differences in decode time per token (TPOT), with a 95 % t-interval over the pairs.
Target: <= 1 % of decode time. On a busy machine the interval is wide; the second figure
(the sampler's CPU time per sample, as a share of one core at the configured interval)
does not depend on the neighbours.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy import stats

from engine.backends.base import get_backend
from engine.measure.metrics import tpot_ns
from engine.measure.stats import percentile_ci
from engine.measure.telemetry import TelemetrySampler
from engine.run.driver import drive_phase
from engine.run.plan import planned
from engine.run.runner import ProgressState
from engine.spec import parse_job_spec
from engine.weights import models


def _phase(backend, prompts, spec, sampled: bool) -> float:
    """Mean TPOT (ms) of one measured phase, with or without the telemetry sampler beside it."""
    state = ProgressState()
    sampler = TelemetrySampler("cpu", requests_done=lambda: state.requests_done) if sampled else None
    if sampler:
        sampler.start()
    try:
        records = drive_phase(backend, prompts, spec.workload, state).records
    finally:
        if sampler:
            sampler.stop()
    values = [v / 1e6 for r in records if (v := tpot_ns(r)) is not None]
    return statistics.mean(values)


def sample_cost(n: int = 300) -> tuple[float, int]:
    """Seconds of CPU one sample takes (thread time, median of ``n``) and the interval in ms."""
    sampler = TelemetrySampler("cpu")
    sampler.start()
    sampler.stop()
    costs = []
    for _ in range(n):
        t0 = time.thread_time()
        sampler._sample()
        costs.append(time.thread_time() - t0)
    return statistics.median(costs), sampler.interval_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--output-tokens", type=int, default=24)
    a = ap.parse_args()
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 16, "output_tokens": a.output_tokens, "requests": a.requests},
        }
    )
    resolved = models.resolve(spec.model)
    backend = get_backend(spec.recipe.engine)
    backend.load(resolved, spec.recipe, spec.device, lambda *_: None)
    prompts = planned([[1 + (i % 50) for i in range(16)]] * a.requests, a.output_tokens)
    _phase(backend, prompts, spec, False)  # warm-up
    diffs = []
    for pair in range(a.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        got = {sampled: _phase(backend, prompts, spec, sampled) for sampled in order}
        diffs.append(100 * (got[True] - got[False]) / got[False])
        print(f"pair {pair + 1}: TPOT without {got[False]:.2f} ms, with {got[True]:.2f} ms ({diffs[-1]:+.2f} %)")
    backend.unload()
    mean = statistics.mean(diffs)
    half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else 0
    print(
        f"sampler overhead on decode, mean of pairs: {mean:+.2f} % (95 % CI {mean - half:+.2f} to {mean + half:+.2f} %)"
    )
    # one pair disturbed by another process moves the mean by tens of %: the median of the pairs resists it
    median, around = statistics.median(diffs), percentile_ci(diffs, 50)
    ci = f"95 % CI {around.lo:+.2f} to {around.hi:+.2f} %" if around else "too few pairs for an interval"
    print(f"sampler overhead on decode, median of pairs: {median:+.2f} % ({ci}), target <= 1 %")
    cost, interval = sample_cost()
    print(
        f"sampler CPU time: {cost * 1e3:.3f} ms per sample every {interval} ms = {100 * cost / (interval / 1e3):.2f} % "
        "of one core"
    )


if __name__ == "__main__":
    main()
