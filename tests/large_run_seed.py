"""Large synthetic serving runs (10,000 to 100,000 requests) for the large-run benchmark and the Run page's test.

:func:`large_requests` draws the stamps of a closed-loop run at a fixed concurrency with numpy
(no Python loop per token): waves of ``concurrency`` requests, each with a TTFT that grows with
the wave's load and one token every ``tpot_ms`` (jittered), a few failed requests, two warm-up
requests. :func:`store_large_run` computes its metrics like the runner does and stores it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.measure import aggregates
from engine.measure.records import RequestRecord
from engine.run.repeats import Measured, Repeat, repeat_metrics
from engine.spec import parse_job_spec
from storage.runs import NewRun, save_run

MS = 1_000_000


def large_requests(
    n: int = 10_000,
    concurrency: int = 1024,
    tokens: int = 32,
    ttft_ms: float = 100.0,
    tpot_ms: float = 20.0,
    seed: int = 0,
    warmup: int = 2,
    failed_every: int = 997,
) -> list[RequestRecord]:
    """``warmup`` warm-up requests then ``n`` measured ones (module doc); stamps start at 1 s."""
    rng = np.random.default_rng(seed)
    total = warmup + n
    wave = np.arange(total) // concurrency
    span_ns = int((ttft_ms + tokens * tpot_ms) * MS)
    send = (1_000 * MS + wave * span_ns + rng.integers(0, 5 * MS, total)).astype(np.int64)
    first = send + (rng.gamma(8.0, ttft_ms / 8.0, total) * MS).astype(np.int64)
    gaps = (rng.uniform(0.8, 1.2, (total, tokens - 1)) * tpot_ms * MS).astype(np.int64)
    stamps = np.concatenate([first[:, None], first[:, None] + np.cumsum(gaps, axis=1)], axis=1).tolist()
    ones = [1] * tokens
    out = []
    for i, (s, chunk_ns) in enumerate(zip(send.tolist(), stamps, strict=True)):
        failed = i >= warmup and (i - warmup) % failed_every == failed_every - 1
        out.append(
            RequestRecord(
                index=i,
                arrival_ns=s,
                send_ns=s,
                prompt_tokens=32,
                chunk_ns=chunk_ns[:3] if failed else chunk_ns,
                chunk_tokens=ones[:3] if failed else list(ones),
                error="HTTP 500: internal server error" if failed else None,
                warmup=i < warmup,
                requested_output_tokens=tokens,
            )
        )
    return out


def large_spec(n: int, concurrency: int, tokens: int = 32) -> dict[str, Any]:
    """The spec of such a run: the openai engine at a fixed concurrency."""
    return parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "recipe": {"engine": "openai", "model_name": "mock", "base_url": "http://127.0.0.1:9/v1"},
            "workload": {
                "requests": n,
                "output_tokens": tokens,
                "arrival": "concurrency",
                "max_concurrency": concurrency,
                "warmup_requests": 2,
            },
            "name": f"large run, {n:,} requests at c{concurrency}",
        }
    ).model_dump(mode="json")


def summarised(requests: list[RequestRecord]) -> dict[str, Any]:
    """The run's metrics as the runner computes them (one measured phase, warm-up excluded)."""
    measured = [r for r in requests if not r.warmup]
    start = min(r.send_ns for r in measured)
    end = max(r.chunk_ns[-1] for r in measured)
    metrics = repeat_metrics(Measured([Repeat(0, measured, start, end)]), [r for r in requests if r.warmup], None)
    metrics.update(load_s=0.1, peak_memory_bytes=None, peak_memory_kind="not measured", noise_flags=[])
    return metrics


def store_large_run(db: Any, n: int = 100_000, concurrency: int = 1024, tokens: int = 32) -> int:
    """Store one large run (requests, metrics, spec); its id."""
    requests = large_requests(n, concurrency, tokens)
    spec = large_spec(n, concurrency, tokens)
    parsed = parse_job_spec(spec)
    return save_run(
        db,
        NewRun(
            status="done",
            spec=spec,
            fingerprint=parsed.fingerprint(),
            model="synthetic:smollm2-135m",
            engine="openai",
            device="cpu",
            device_name="remote server (unknown device)",
            name=spec["name"],
            provenance={"host": "test"},
            metrics=summarised(requests),
            requests=requests,
            series={aggregates.KIND: aggregates.summarise(requests).to_json()},  # as the runner stores it
        ),
    )
