"""A trace run whose schedule was not kept, as an engine serving one request at a time leaves it (issue 34, item 4).

Requests are due every ``gap_ms`` but each takes ``service_ms``, so each one waits for the ones before it:
send minus due grows to many seconds, while the client itself sends within a fraction of a millisecond
of the moment a request could go (its ``client`` group's send lag).
"""

from __future__ import annotations

from typing import Any

from seed_runs import MS, spec_dict

from engine.measure.metrics import compute_metrics
from engine.measure.records import RequestRecord, RunRecord
from engine.spec import parse_job_spec
from storage.runs import NewRun, save_run

T0 = 10**12


def serial_trace_requests(
    n: int = 40, gap_ms: float = 250.0, service_ms: float = 1800.0, ttft_ms: float = 1360.0
) -> list[RequestRecord]:
    """One warm-up request, then ``n`` due every ``gap_ms``, each sent when the one before ended."""
    out = [RequestRecord(0, T0 - 5000 * MS, T0 - 5000 * MS, 64, [T0 - 4000 * MS], [1], warmup=True)]
    free = T0
    for i in range(n):
        due = T0 + int(i * gap_ms * MS)
        send = max(due, free) + int(0.26 * MS)
        first = send + int(ttft_ms * MS)
        chunks = [first + k * int((service_ms - ttft_ms) / 7 * MS) for k in range(8)]
        out.append(RequestRecord(i + 1, due, send, 64, chunks, [1] * 8, requested_output_tokens=8))
        free = chunks[-1]
    return out


CLIENT = {
    "processes": 1, "send_lag_ms_p50": 0.26, "send_lag_ms_p99": 0.41, "send_lag_ms_max": 0.5,
    "loop_lag_ms_p50": 0.1, "loop_lag_ms_p99": 0.9, "loop_lag_ms_max": 1.2, "loop_lag_samples": 900,
    "cpu_share": 0.02, "cpu_share_max": 0.03, "cores": 1, "machine_cores": 2, "read_stamps": "event loop",
}  # fmt: skip


def make_serial_trace_run(db: Any, **kwargs: Any) -> int:
    """Store the run (transformers, a 10x-faster Mooncake trace); returns its id."""
    requests = serial_trace_requests(**kwargs)
    measured = [r for r in requests if not r.warmup]
    run = RunRecord(T0, measured[-1].chunk_ns[-1], requests, warmup_requests=1, due_times=True)
    metrics = compute_metrics(run)
    metrics.update(client=CLIENT, peak_memory_bytes=600 * 2**20, load_s=2.0, weights_memory_bytes=540 * 2**20)
    workload = {"prompt_tokens": None, "trace": "/data/mooncake.jsonl", "time_scale": 10, "requests": len(measured),
                "source_sha256": "ab" * 32}  # fmt: skip
    spec = spec_dict(workload=workload)
    source = {"name": "trace", "format": "mooncake", "rows": len(measured), "duration_s": 10.0}
    return save_run(
        db,
        NewRun(status="done", spec=spec, fingerprint=parse_job_spec(spec).fingerprint(), model="demo",
               engine="transformers", device="cpu", device_name="test CPU", name="serial trace",
               provenance={"request_source": source}, metrics=metrics, requests=requests),
    )  # fmt: skip
