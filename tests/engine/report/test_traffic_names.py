"""Runs say their traffic: workload_words names the source, Compare says when two runs had different traffic."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from seed_runs import make_run, open_page, spec_dict

from engine.report.recipes import context_differences, workload_words

SHA = "ab" * 32
TRACE = {"prompt_tokens": None, "trace": "/data/mooncake.jsonl", "time_scale": 10, "source_sha256": SHA}


@pytest.mark.parametrize(
    ("workload", "words"),
    [
        ({"trace": "t.jsonl", "trace_format": "mooncake", "time_scale": 10, "requests": 1_000_000}, "trace t.jsonl ×10"),
        ({"trace": "t.csv", "trace_format": "azure", "requests": 500}, "trace t.csv · ≤500 rows"),
        ({"dataset": "d.json", "requests": 50}, "dataset d.json × 50 req"),
        ({"dataset": "d.json", "multi_turn": True, "requests": 40, "think_time_s": 1.5}, "sessions of d.json × 40 turns"),
        ({"prompt_tokens": 64, "output_tokens": 32, "requests": 8, "prefix_count": 4, "prefix_tokens": 512},
         "64-token prompts, 4 prefixes of 512 → 32 × 8 req"),
        ({"prompt_tokens": 16, "output_tokens": 4, "requests": 8, "cancel_rate": 0.1, "cancel_after_ms": 300},
         "16-token prompts → 4 × 8 req · cancel 10 %"),
        ({"prompt_tokens": 128, "output_tokens": 32, "requests": 8, "batch_size": 4}, "128-token prompts → 32 × 8 req · batch 4"),
    ],
)  # fmt: skip
def test_workload_words_name_the_source(workload, words) -> None:
    assert workload_words(workload).startswith(words)


def _run(workload: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(spec=spec_dict(workload=workload), engine="transformers", device_name="test CPU")


def test_a_trace_against_synthetic_prompts_is_one_traffic_line() -> None:
    diffs = context_differences(_run(TRACE), _run())
    assert diffs == ["traffic trace mooncake.jsonl ×10 · ≤6 rows (baseline 32-token prompts → 8 × 6 req)"]


def test_two_traces_of_one_file_differ_only_in_what_changed() -> None:
    assert context_differences(_run(TRACE), _run({**TRACE, "time_scale": 2})) == ["time scale 10.0 (baseline 2.0)"]
    other = {**TRACE, "source_sha256": "cd" * 32}
    assert context_differences(_run(TRACE), _run(other))[0].startswith("traffic trace mooncake.jsonl ×10")


def test_compare_warns_that_a_trace_run_had_other_traffic(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    base = make_run(db, name="synthetic")
    trace = make_run(db, name="trace", workload=TRACE)
    at = open_page("views/compare.py", runs=f"{base},{trace}", baseline=str(base))
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any(
        "differs from the baseline in more than its recipe (traffic trace mooncake.jsonl ×10 · ≤6 rows "
        "(baseline 32-token prompts → 8 × 6 req))" in w
        for w in warnings
    ), warnings


def test_a_trace_run_has_due_times_in_either_stored_shape() -> None:
    from engine.report.headline import has_due_times

    nested = {"workload": {"traffic": {"source": "trace", "trace": "t.jsonl"}, "arrival": "batch"}}
    assert has_due_times(nested) and has_due_times({"workload": {"trace": "t.jsonl", "prompt_tokens": None}})
    assert not has_due_times({"workload": {"traffic": {"source": "synthetic"}}})
    assert has_due_times({"workload": {"arrival": "poisson", "rate": 2.0}})
