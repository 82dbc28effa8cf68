"""The text rendering of a result object."""

from __future__ import annotations

from engine.report.results import render_table


def test_table_shows_latency_groups_and_accuracy():
    obj = {
        "run_id": 7,
        "status": "done",
        "model": "demo",
        "engine": "transformers",
        "device": "cpu",
        "ttft_ms": {"mean": 1.0, "p50": 1.0, "p90": 2.0, "p95": 2.5, "p99": 3.0},
        "quality": {
            "perplexity": 20.346,
            "kl_mean": 0.00104,
            "top1_agreement": 0.978,
            "greedy_flip_rate": 0.0,
            "task:count": 1.0,
            "task:count:stderr": 0.0,
            "notes": {"kv": "not visible to scoring"},
        },
    }
    text = render_table(obj)
    assert "TTFT [ms]" in text and "TPOT (GenAI-Perf/AIPerf: ITL) [ms]" in text
    assert "perplexity                        20.346" in text
    assert "top-1 agreement                   97.8%" in text
    assert "task:count" in text and "note: kv: not visible to scoring" in text


def test_failed_run_shows_its_reason_only():
    text = render_table(
        {"run_id": 3, "status": "failed", "model": "m", "engine": "e", "device": "cpu", "error": "out of memory"}
    )
    assert "error: out of memory" in text and "TTFT" not in text
