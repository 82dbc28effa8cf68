"""Hand-made runs for page, export and benchmark tests: real RequestRecords, real metrics, no model."""

from __future__ import annotations

import random
from typing import Any

from engine.measure.metrics import compute_metrics
from engine.measure.records import RequestRecord, RunRecord
from engine.spec import parse_job_spec
from storage.runs import NewRun, save_run

MS = 1_000_000


def make_requests(
    n: int = 6,
    ttft_ms: float = 50.0,
    tpot_ms: float = 10.0,
    output_tokens: int = 8,
    seed: int = 0,
    warmup: int = 1,
    gap_ms: float = 0.0,
) -> list[RequestRecord]:
    """``warmup`` warm-up requests then ``n`` measured ones, sent back to back (plus ``gap_ms``)."""
    rng = random.Random(seed)
    t = 1_000 * MS
    out = []
    for i in range(warmup + n):
        send = t
        first = send + int(ttft_ms * MS * rng.uniform(0.9, 1.1))
        req = RequestRecord(index=i, arrival_ns=send, send_ns=send, prompt_tokens=32, warmup=i < warmup)
        req.add_chunk(first, 1)
        stamp = first
        for _ in range(output_tokens - 1):
            stamp += int(tpot_ms * MS * rng.uniform(0.8, 1.2))
            req.add_chunk(stamp, 1)
        out.append(req)
        t = stamp + int(gap_ms * MS) + 1
    return out


def spec_dict(dtype: str = "float32", model: str = "demo", batch_size: int = 1, name: str | None = None) -> dict:
    return parse_job_spec(
        {
            "model": {"source": model},
            "recipe": {"engine": "transformers", "dtype": dtype},
            "workload": {"prompt_tokens": 32, "output_tokens": 8, "requests": 6, "batch_size": batch_size},
            **({"name": name} if name else {}),
        }
    ).model_dump(mode="json")


def make_run(
    db: Any,
    *,
    name: str | None = None,
    dtype: str = "float32",
    model: str = "demo",
    ttft_ms: float = 50.0,
    tpot_ms: float = 10.0,
    quality: dict | None = None,
    sweep: str | None = None,
    status: str = "done",
    error: str | None = None,
    peak_memory: int = 500 * 2**20,
    batch_size: int = 1,
    seed: int = 0,
    gap_ms: float = 0.0,
    n: int = 6,
) -> int:
    """Store one run with raw stamps and metrics computed from them; returns its id."""
    spec = spec_dict(dtype, model, batch_size, name)
    requests = (
        make_requests(n=n, ttft_ms=ttft_ms, tpot_ms=tpot_ms, seed=seed, gap_ms=gap_ms) if status == "done" else []
    )
    metrics = None
    if status == "done":
        measured = [r for r in requests if not r.warmup]
        run = RunRecord(
            start_ns=measured[0].send_ns, end_ns=measured[-1].chunk_ns[-1], requests=requests, warmup_requests=1
        )
        metrics = compute_metrics(run)
        metrics.update(peak_memory_bytes=peak_memory, load_s=0.5)
    parsed = parse_job_spec(spec)
    return save_run(
        db,
        NewRun(
            status=status,
            spec=spec,
            fingerprint=parsed.fingerprint(),
            model=model,
            engine="transformers",
            device="cpu",
            device_name="test CPU",
            name=name,
            sweep=sweep,
            provenance={"host": "test"},
            metrics=metrics,
            quality=quality,
            error=error,
            requests=requests,
        ),
    )


def seed_basic(db: Any) -> dict[str, int]:
    """Three comparable runs (baseline, faster with a bit worse perplexity, synthetic) and a failed one."""
    ids = {
        "base": make_run(
            db,
            name="FP32 baseline",
            ttft_ms=60,
            tpot_ms=20,
            quality={"perplexity": 18.76, "kl_mean": 0.0, "top1_agreement": 1.0},
        ),
        "fast": make_run(
            db,
            name="INT4",
            dtype="bfloat16",
            ttft_ms=55,
            tpot_ms=8,
            peak_memory=200 * 2**20,
            quality={"perplexity": 18.84, "kl_mean": 0.012, "top1_agreement": 0.96},
            seed=1,
        ),
        "synth": make_run(db, model="synthetic:smollm2-135m", ttft_ms=40, tpot_ms=12, seed=2),
        "failed": make_run(db, name="broken", status="failed", error="out of memory while loading"),
    }
    return ids
