"""Small deployments and workloads for the serving simulator's tests."""

from __future__ import annotations

import numpy as np

from engine.whatif.hardware import get_hardware
from engine.whatif.serving import IDEAL, Arrivals, Precisions, Served, ServerConfig, SimRequest, sim_request, simulate
from engine.whatif.serving.result import SimResult
from engine.whatif.serving.steptime import StepCosts
from engine.whatif.shapes import model_shape

H100 = get_hardware("h100-sxm")
SMALL = Served(H100, model_shape("synthetic:llama-3.2-1b"), Precisions.resolve(H100))
LLAMA8B = Served(H100, model_shape("synthetic:llama-3-8b"), Precisions.resolve(H100))


def ids(n: int, seed: int) -> np.ndarray:
    """``n`` token ids of their own (a different seed: a different prompt)."""
    return np.random.default_rng(seed).integers(0, 30_000, size=n)


def requests(
    prompts: list[int], outputs: list[int] | int, block_size: int = 16, due: list[float] | None = None, **kw
) -> list[SimRequest]:
    """Requests of prompts of their own with these lengths."""
    outs = outputs if isinstance(outputs, list) else [outputs] * len(prompts)
    return [
        sim_request(i, ids(p, 1000 + i), o, block_size, due_s=None if due is None else due[i], **kw)
        for i, (p, o) in enumerate(zip(prompts, outs, strict=True))
    ]


def run(
    reqs: list[SimRequest],
    config: ServerConfig | None = None,
    costs: StepCosts = IDEAL,
    arrivals: Arrivals | None = None,
    served: Served = SMALL,
    **kw,
) -> SimResult:
    """Simulate on the small model, the bare roofline by default, everything sent at once."""
    return simulate(reqs, config or ServerConfig(), served, costs, arrivals or Arrivals("max"), **kw)


def steps_of(result: SimResult, index: int) -> list[int]:
    """The steps in which a request received tokens."""
    return [s for p, e in result.requests[index].runs for s in range(p, e)]


def in_flight_peak(result: SimResult) -> int:
    """The most requests between their send and their end at once."""
    events = sorted([(o.send_s, 1) for o in result.requests] + [(o.end_s, -1) for o in result.requests])
    peak = now = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak
