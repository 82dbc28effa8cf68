"""A stored run with side records (server metrics, a profile), for the Run page's sections."""

from __future__ import annotations

from typing import Any

from seed_runs import make_requests, spec_dict

from engine.measure.metrics import compute_metrics
from engine.measure.records import RunRecord
from engine.spec import parse_job_spec
from storage.runs import NewRun, save_run

T0_NS = 1_000_000_000  # make_requests' first stamp


def server_series(n: int = 5) -> dict[str, Any]:
    return {
        "interval_ms": 500.0,
        "t0_ns": T0_NS,
        "t_s": [0.5 * i for i in range(n)],
        "fields": {
            "num_requests_running": [min(i, 2) for i in range(n)],
            "num_requests_waiting": [max(0, i - 3) for i in range(n)],
            "kv_cache_usage_perc": [i / (2 * (n - 1)) for i in range(n)],
            "prefix_cache_hit_rate": [None] + [0.25] * (n - 1),
        },
        "source": "vllm",
        "raw_names": {
            "num_requests_running": "vllm:num_requests_running",
            "num_requests_waiting": "vllm:num_requests_waiting",
            "kv_cache_usage_perc": "vllm:kv_cache_usage_perc",
        },
        "errors": 0,
    }


def seed_run(db: Any, series: dict[str, dict[str, Any]], provenance: dict[str, Any] | None = None) -> int:
    """A done run (real stamps and metrics) stored with ``series``."""
    spec = spec_dict()
    requests = make_requests(n=6)
    measured = [r for r in requests if not r.warmup]
    metrics = compute_metrics(RunRecord(measured[0].send_ns, measured[-1].chunk_ns[-1], requests, 1))
    return save_run(
        db,
        NewRun(
            status="done",
            spec=spec,
            fingerprint=parse_job_spec(spec).fingerprint(),
            model="demo",
            engine="transformers",
            device="cpu",
            device_name="test CPU",
            provenance=provenance or {"host": "test"},
            metrics=metrics,
            requests=requests,
            series=series,
        ),
    )
