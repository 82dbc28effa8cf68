"""N decode steps of the loaded transformers recipe under ``torch.profiler``: top operators and a trace.

One batch of the run's measured prompts is generated again for ``steps + 2`` tokens with the
recipe's own generation knobs (``backend.generate_batch``). Every token of the batch's first row
steps the profiler: the prefill step is skipped (``wait=1``), the first decode step warms the
profiler up, and the next ``steps`` decode steps are recorded. CPU activities always; CUDA
activities too on a GPU, where the table ranks operators and kernels by their device time.

The table is torch's own ``key_averages()``: per operator its self time (ms, over the
recorded steps), calls, and share (% of the summed self time of every operator, like
torch's "Self CPU %" column, so the shares add up to 100 %). The time of each step outside
any operator (Python, the generate loop) is one row, ``(outside operators)``. The trace is
torch's Chrome/Perfetto JSON, gzipped (``chrome://tracing``, https://ui.perfetto.dev).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from engine.backends.transformers.backend import TransformersBackend
from engine.jsonvalue import JSONObject

if TYPE_CHECKING:
    from torch.autograd.profiler_util import FunctionEventAvg

TOP = 20
OUTSIDE = "(outside operators)"


class _StepSink:
    """Steps the profiler at every token of row 0 and stamps the steps (perf_counter_ns)."""

    def __init__(self, prof: profile) -> None:
        self.prof = prof
        self.stamps: list[int] = []

    def __call__(self, row: int, t_ns: int, n_tokens: int) -> None:
        if row == 0:
            self.stamps.append(t_ns)
            self.prof.step()


def _self_us(event: FunctionEventAvg, on_cuda: bool) -> float:
    if on_cuda:
        return float(getattr(event, "self_device_time_total", 0.0) or 0.0)
    return float(event.self_cpu_time_total or 0.0)


def top_operators(events: Iterable[FunctionEventAvg], on_cuda: bool, limit: int = TOP) -> list[JSONObject]:
    """The ``limit`` operators with the most self time: name, self_ms, calls, share_pct (of all operators)."""
    rows: dict[str, list[float]] = {}
    for event in events:
        name = OUTSIDE if str(event.key).startswith("ProfilerStep") else str(event.key)
        self_us = _self_us(event, on_cuda)
        got = rows.setdefault(name, [0.0, 0])
        got[0] += self_us
        got[1] += 0 if name == OUTSIDE else int(event.count)
    total = sum(us for us, _ in rows.values())
    ranked = sorted(rows.items(), key=lambda kv: kv[1][0], reverse=True)[:limit]
    return [
        {
            "name": name,
            "self_ms": round(us / 1000.0, 3),
            "calls": int(calls),
            "share_pct": round(100.0 * us / total, 3) if total > 0 else 0.0,
        }
        for name, (us, calls) in ranked
        if us > 0
    ]


def profile_decode(
    backend: TransformersBackend, prompts: list[list[int]], steps: int, trace_path: Path | None
) -> JSONObject:
    """Profile ``steps`` decode steps of ``prompts`` (one batch) on the loaded backend; the ``profile`` record."""
    device = str(backend.info().get("device", "cpu"))
    on_cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_cuda else [])]
    got: JSONObject = {}

    def ready(prof: profile) -> None:
        got["top"] = top_operators(prof.key_averages(), on_cuda)
        if trace_path is not None:
            trace_path.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(trace_path))
            got["trace_file"] = str(trace_path)

    t0 = time.perf_counter()
    plan = schedule(wait=1, warmup=1, active=steps, repeat=1)
    with profile(activities=activities, schedule=plan, on_trace_ready=ready) as prof:
        sink = _StepSink(prof)
        backend.generate_batch(prompts, [steps + 2] * len(prompts), True, sink)
    recorded = sink.stamps[2 : steps + 2]
    step_ms = (recorded[-1] - sink.stamps[1]) / 1e6 / len(recorded) if len(recorded) >= 1 else None
    return {
        "steps": min(steps, len(recorded)),
        "batch_size": len(prompts),
        "activities": [a.name.lower() for a in activities],
        "device": device,
        "torch": torch.__version__,
        "top": got.get("top", []),
        "trace_file": got.get("trace_file"),
        "step_ms_profiled": step_ms,
        "profile_s": time.perf_counter() - t0,
    }
