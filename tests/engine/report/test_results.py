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
    assert "perplexity                        20.35" in text
    assert "top-1 agreement vs reference      97.8%" in text
    assert "count                             100.0% ± 0.0%" in text and "note: kv: not visible to scoring" in text


def test_failed_run_shows_its_reason_only():
    text = render_table(
        {"run_id": 3, "status": "failed", "model": "m", "engine": "e", "device": "cpu", "error": "out of memory"}
    )
    assert "error: out of memory" in text and "TTFT" not in text


def test_table_of_a_real_run_lists_metrics_in_their_units_only():
    from seed_runs import real_quality

    quality = real_quality(
        perplexity=16.5,
        kl_mean=0.0021,
        top1=0.97,
        tasks={"pile": (0.81, "lm-eval bits_per_byte,none"), "count": (0.5, "multiple choice")},
    )
    obj = {
        "run_id": 8,
        "status": "done",
        "model": "demo",
        "engine": "transformers",
        "device": "cpu",
        "completed": 3,
        "failed": 1,
        "error_rate": 0.25,
        "quality": quality,
    }
    text = render_table(obj)
    for word in ("window", "stride", "kl top k", "kl_top_k", "corpus_tokens", "baseline_perplexity", "nll"):
        assert word not in text
    assert "pile (bits_per_byte)              0.81 ± 0.01" in text
    assert "count                             50.0% ± 1.0%" in text
    assert "3 ok, 1 failed (25%)" in text


def test_failed_run_without_a_reason_never_reads_none():
    text = render_table({"run_id": 4, "status": "failed", "model": "m", "engine": "e", "device": "cpu", "error": None})
    assert "error: no reason recorded" in text and "None" not in text


def test_table_says_n_too_small_and_prints_intervals(db):
    """6 requests: p50 with its interval, p90 and above "n too small"; throughput with its CI."""
    from seed_runs import make_run

    from engine.report.results import result_object
    from storage.runs import get_run

    text = render_table(result_object(get_run(db, make_run(db, name="six", n=6))))
    ttft = next(line for line in text.splitlines() if line.startswith("TTFT [ms]"))
    assert ttft.count("n too small") == 3
    assert ttft.rstrip().endswith("6")  # n
    ci_line = text.splitlines()[text.splitlines().index(ttft) + 1]
    assert ci_line.startswith("  95 % CI") and "–" in ci_line
    assert "output tokens/s" in text and "(95 % CI " in text


def test_a_result_object_of_an_older_run_infers_support_from_its_counts(db):
    from seed_runs import make_run

    from engine.report.results import result_object
    from storage.runs import get_run

    obj = result_object(get_run(db, make_run(db, name="old", n=4, without_intervals=True)))
    assert obj["ttft_ms"]["supported"] == {"mean": True, "p50": False, "p90": False, "p95": False, "p99": False}
    assert obj["ttft_ms"]["ci"] is None and obj["ttft_ms"]["n"] == 4  # no requests given: no interval
    assert "n too small" in render_table(obj)
