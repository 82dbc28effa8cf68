"""Hand-made runs for page, export and benchmark tests: real RequestRecords, real metrics, no model."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from engine.measure.metrics import compute_metrics
from engine.measure.records import RequestRecord, RunRecord
from engine.spec import parse_job_spec
from storage.runs import NewRun, save_run

MS = 1_000_000

# The quality dict of a real demo run (`python -m engine run --model demo --quality ppl,fidelity
# --quality-tokens 1024`, the reference recipe itself, so KL 0 and top-1 100 %), copied verbatim.
REAL_QUALITY: dict[str, Any] = {
    "corpus": "default (standard-library docstrings, Python 3.11)",
    "corpus_tokens": 1024,
    "window": 512,
    "stride": 512,
    "baseline_key": "b0b13062b19b5c68e605",
    "baseline_cached": False,
    "perplexity": 16.44145140255318,
    "perplexity_tokens": 1022,
    "perplexity_stderr": 1.4207556126941452,
    "nll_mean": 2.7998056705579937,
    "nll_stderr": 0.08641302874717721,
    "baseline_perplexity": 16.44145140255318,
    "kl_mean": 0.0,
    "kl_p99": 0.0,
    "kl_stderr": 0.0,
    "kl_positions": 1022,
    "kl_top_k": 256,
    "top1_agreement": 1.0,
    "top1_agreement_stderr": 0.0,
    "greedy_flip_rate": 0.0,
    "greedy_flip_tokens": 32,
    "greedy_flip_prompts": 2,
    "timings_s": {"corpus_s": 20.45605595400002, "total_s": 20.456096810999952},
}


def real_quality(
    perplexity: float = 16.44145140255318,
    kl_mean: float = 0.0,
    top1: float = 1.0,
    flips: float = 0.0,
    tasks: dict[str, tuple[float, str]] | None = None,
    notes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A quality dict shaped like a real one (every bookkeeping key), with the headline figures replaced.

    ``tasks`` maps a task name to (value, kind), kind as stored: ``"multiple choice"`` for a local
    task, ``"lm-eval acc_norm,none"`` or ``"lm-eval word_perplexity,none"`` for lm-evaluation-harness.
    """
    q = dict(REAL_QUALITY, perplexity=perplexity, kl_mean=kl_mean, kl_p99=kl_mean * 8, top1_agreement=top1)
    q["perplexity_stderr"] = perplexity * q["nll_stderr"]
    q["greedy_flip_rate"] = flips
    q["timings_s"] = dict(q["timings_s"])
    for name, (value, kind) in (tasks or {}).items():
        q[f"task:{name}"] = value
        q[f"task:{name}:stderr"] = 0.01
        q[f"task:{name}:n"] = 100
        q[f"task:{name}:kind"] = kind
        q["timings_s"][f"task:{name}_s"] = 3.5
    if notes:
        q["notes"] = notes
    return q


def paired_quality(shift: float = 0.0, seed: int = 0, blocks: int = 32) -> dict[str, Any]:
    """A real-shaped quality dict whose perplexity was scored block by block (64 tokens each) on one shared
    text: per-token NLL ``shift`` above the text's, plus a little noise of its own; runs made with it pair."""
    import math

    import numpy as np

    text = np.random.default_rng(100).normal(3.0, 0.3, blocks) * 64
    nll = text + 64 * shift + np.random.default_rng(seed).normal(0, 0.3, blocks)
    quality = real_quality(perplexity=math.exp(nll.sum() / (64 * blocks)))
    quality["perplexity_blocks"] = {
        "text": "sha1:corpus",
        "block_tokens": 64,
        "tokens": [64] * blocks,
        "nll": nll.tolist(),
    }
    return quality


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


def spec_dict(
    dtype: str = "float32",
    model: str = "demo",
    batch_size: int = 1,
    name: str | None = None,
    workload: dict | None = None,
    recipe: dict | None = None,
) -> dict:
    return parse_job_spec(
        {
            "model": {"source": model},
            "recipe": {"engine": "transformers", "dtype": dtype, **(recipe or {})},
            "workload": {
                "prompt_tokens": 32,
                "output_tokens": 8,
                "requests": 6,
                "batch_size": batch_size,
                **(workload or {}),
            },
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
    workload: dict | None = None,
    recipe: dict | None = None,
    failed_requests: int = 0,
    weights_memory: int | None = None,
    provenance: dict | None = None,
    job: tuple[int, str] | None = None,
    extra_metrics: dict | None = None,
    without_intervals: bool = False,
    series: dict | None = None,
) -> int:
    """Store one run with raw stamps and metrics computed from them; returns its id.

    ``failed_requests`` of the measured requests end with an error after their first token.
    ``job``: (job id, worker id) of a claimed job the run is stored for (and linked to).
    ``without_intervals`` stores the metrics as runs did before issue 14 (no ``n``, no ``ci``).
    """
    spec = spec_dict(dtype, model, batch_size, name, workload, recipe)
    requests = (
        make_requests(n=n, ttft_ms=ttft_ms, tpot_ms=tpot_ms, seed=seed, gap_ms=gap_ms) if status == "done" else []
    )
    for req in requests[len(requests) - failed_requests :] if failed_requests else []:
        req.error = "HTTP 500: internal server error"
    metrics = None
    if status == "done":
        measured = [r for r in requests if not r.warmup]
        run = RunRecord(
            start_ns=measured[0].send_ns, end_ns=measured[-1].chunk_ns[-1], requests=requests, warmup_requests=1
        )
        metrics = compute_metrics(run)
        metrics.update(peak_memory_bytes=peak_memory, load_s=0.5)
        if weights_memory is not None:
            metrics["weights_memory_bytes"] = weights_memory
        metrics.update(extra_metrics or {})
        if without_intervals:
            metrics = strip_intervals(metrics)
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
            provenance=provenance or {"host": "test"},
            metrics=metrics,
            quality=quality,
            error=error,
            requests=requests,
            job_id=job[0] if job else None,
            worker_id=job[1] if job else None,
            series=series or {},
        ),
    )


PREDICTION_BAND = {
    "median_abs_error_pct": {"ttft_p50": 4.0, "ttft_p90": 9.0, "tpot_p50": 10.0, "e2el_p90": 11.0, "throughput": 10.0},
    "worst_abs_error_pct": {"ttft_p50": 9.0, "ttft_p90": 22.0, "tpot_p50": 17.0, "e2el_p90": 15.0, "throughput": 29.0},
    "n_runs": 3,
}
AZURE_TRACE = {  # a workload replaying a 90 s window of an Azure-format trace (flat fields, as make_run takes them)
    "prompt_tokens": None,
    "trace": "/data/traces/azure_window.csv",
    "trace_format": "azure",
    "trace_duration_s": 90.0,
}


def prediction(
    hardware: str = "local:cpu", name: str = "test CPU (local, measured)", tp: int = 1, band: dict | None = None
) -> dict[str, Any]:
    """A provenance ``prediction`` shaped as engine/whatif/predict/run.py stores it (``band`` None: uncalibrated)."""
    return {
        "hardware": hardware,
        "hardware_name": name,
        "tp": tp,
        "label": (
            f"calibrated from 3 runs on {name}; LOO median error TTFT p50 ±4 %, TPOT p50 ±10 %"
            if band is not None
            else "uncalibrated: the vllm family's priors on the bare roofline, no error band claimed"
        ),
        "calibrated": band is not None,
        "carried": False,
        "band": band,
        "simulation": {"steps": 120, "preemptions": 0},
    }


def make_predicted_run(
    db: Any,
    *,
    name: str | None = None,
    ttft_ms: float = 50.0,
    tpot_ms: float = 10.0,
    seed: int = 0,
    n: int = 6,
    workload: dict | None = None,
    recipe: dict | None = None,
    hardware: str = "local:cpu",
    hardware_name: str = "test CPU (local, measured)",
    tp: int = 1,
    band: dict | None = PREDICTION_BAND,
) -> int:
    """Store a run the serving simulator predicted (``predicted=True`` with its provenance's ``prediction``): the
    same spec as :func:`make_run` with the same arguments (so the same fingerprint: its measured twin), the
    hardware's key as its device, no memory, load time or accuracy."""
    spec = spec_dict("float32", "demo", 1, name, workload, recipe)
    requests = make_requests(n=n, ttft_ms=ttft_ms, tpot_ms=tpot_ms, seed=seed)
    measured = [r for r in requests if not r.warmup]
    record = RunRecord(start_ns=measured[0].send_ns, end_ns=measured[-1].chunk_ns[-1], requests=requests)
    metrics = compute_metrics(record)
    metrics.update(noise_flags=[], peak_memory_bytes=None, weights_memory_bytes=None, load_s=None)
    device_name = hardware_name if tp == 1 else f"{tp} x {hardware_name}"
    return save_run(
        db,
        NewRun(
            status="done",
            spec=spec,
            fingerprint=parse_job_spec(spec).fingerprint(),
            model="demo",
            engine="transformers",
            device=hardware,
            device_name=device_name,
            name=name,
            provenance={"prediction": prediction(hardware, hardware_name, tp, band), "device_name": device_name},
            metrics=metrics,
            requests=requests,
            predicted=True,
        ),
    )


def strip_intervals(metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics as stored before intervals existed: no ``ci`` and no per-group ``n``/``ci``."""
    out = {k: v for k, v in metrics.items() if k != "ci"}
    for key, value in out.items():
        if isinstance(value, dict) and "ci" in value:
            out[key] = {k: v for k, v in value.items() if k not in ("n", "ci")}
    return out


def seed_basic(db: Any) -> dict[str, int]:
    """Three comparable runs (baseline, faster with a bit worse perplexity, synthetic) and a failed one.

    The accuracy figures are real quality dicts (every bookkeeping key of a stored run).
    """
    ids = {
        "base": make_run(
            db,
            name="FP32 baseline",
            ttft_ms=60,
            tpot_ms=20,
            quality=real_quality(perplexity=18.76),
        ),
        "fast": make_run(
            db,
            name="INT4",
            dtype="bfloat16",
            ttft_ms=55,
            tpot_ms=8,
            peak_memory=200 * 2**20,
            quality=real_quality(perplexity=18.84, kl_mean=0.012, top1=0.96, flips=0.0625),
            seed=1,
        ),
        "synth": make_run(db, model="synthetic:smollm2-135m", ttft_ms=40, tpot_ms=12, seed=2),
        "failed": make_run(db, name="broken", status="failed", error="out of memory while loading"),
    }
    return ids


APP = Path(__file__).resolve().parents[1] / "app.py"


def open_page(page: str, **params: Any) -> Any:
    """Run the app (AppTest) on ``page`` (e.g. ``views/compare.py``) with the given query parameters."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=30)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(page)
    return at.run()
