"""What a PM reads (issue 34, items 2, 3, 8 and 9): one formatter, units that match their cells, workloads
named in words, a report rather than a table dump, links that say when they are local."""

from __future__ import annotations

import re

import pandas as pd
from seed_runs import make_run, real_quality, seed_basic
from test_one_verdict import X, Y, _explore, _store

from engine.report.compare import compare_runs, comparison_frame
from engine.report.explore_report import explore_html
from engine.report.figures import explore_scatter, figure_words
from engine.report.fronts import group_labels, pareto_fronts
from engine.report.report_html import link_words
from engine.report.summary import summarize_against
from storage.runs import get_run

SHA = "2f1e" * 16


def test_perplexity_has_one_format_everywhere(db):
    base = get_run(db, make_run(db, quality=real_quality(perplexity=20.3459)))
    other = get_run(db, make_run(db, seed=1, dtype="bfloat16", quality=real_quality(perplexity=20.40)))
    table = comparison_frame(compare_runs([base, other], base.id), formatted=True).set_index("metric")
    assert table.loc["perplexity"].iloc[2] == "20.35" and table.loc["perplexity"].iloc[4] == "20.40"  # not 20.4
    frame = pd.DataFrame({"run_id": [1], Y: [20.3459], f"{Y}:lo": [20.1], f"{Y}:hi": [20.6]})
    assert figure_words(frame, Y) == ["perplexity: 20.35 (95 % CI 20.10–20.60)"]
    assert "20.4 " not in summarize_against(other, base)


def test_memory_rows_carry_their_unit_in_each_cell(db):
    ids = seed_basic(db)
    runs = [get_run(db, ids["base"]), get_run(db, ids["fast"])]
    formatted = comparison_frame(compare_runs(runs, ids["base"]), formatted=True).set_index("metric")
    memory = formatted.loc["peak memory (measured phase)"]
    assert memory["unit"] == "" and memory.iloc[2] == "500.0 MiB"  # never "bytes" beside "500.0 MiB"
    raw = comparison_frame(compare_runs(runs, ids["base"])).set_index("metric")
    assert raw.loc["peak memory (measured phase)", "unit"] == "bytes"  # the CSV keeps numbers in bytes


def _trace_rows() -> pd.DataFrame:
    common = {
        "model": "demo (SmolLM2-135M-Instruct, GGUF Q4_1, 135M)",
        "engine": "transformers",
        "tpot_ms_p50": 10.0,
        Y: 20.0,
    }
    plain = {**common, "run_id": 1, "workload.prompt_tokens": 16.0, "workload.output_tokens": 16.0}
    trace = {
        **common, "run_id": 2, "tpot_ms_p50": 12.0, "workload.prompt_tokens": None, "workload.output_tokens": 16.0,
        "workload.trace": "/home/ana/traces/conversation_trace.jsonl", "workload.trace_format": "mooncake",
        "workload.time_scale": 10.0, "workload.source_output_lengths": False, "workload.source_sha256": SHA,
        "workload.trace_duration_s": 20.0,
    }  # fmt: skip
    return pd.DataFrame([plain, trace])


def test_workloads_are_named_in_words_in_legends_and_warnings():
    frame = _trace_rows()
    labels = sorted(group_labels(frame).values())
    assert labels == [
        "demo (SmolLM2-135M-Instruct) · 16-token prompts → 16",
        "demo (SmolLM2-135M-Instruct) · trace conversation_trace.jsonl ×10 · fixed output lengths · 20 s window",
    ]
    fronts = pareto_fronts(frame, "tpot_ms_p50", Y)
    said = " ".join([*fronts.differences, *fronts.labels.values()])
    for internal in (SHA[:4], "/home/ana", "sha256", "source output lengths", "trace duration s", "16.0", "False"):
        assert internal not in said, internal
    fig = explore_scatter(frame, "tpot_ms_p50", Y, fronts=fronts)
    legend = " ".join(t.name for t in fig.data)
    assert (
        SHA[:4] not in legend
        and "/home/ana" not in legend
        and "Pareto front: demo (SmolLM2-135M-Instruct) · 16-token prompts → 16" in legend
    )
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0  # under the plot, never beside it


def test_the_explore_report_is_a_report_not_a_table_dump(db):
    base_id, new_id = _store(db, "faster but worse")
    frame, records, fronts = _explore(db, (base_id, new_id))
    report = explore_html(frame, X, Y, link="http://127.0.0.1:8501/explore?x=tpot_ms_p50", records=records)
    words = re.sub(r"<script.*?</script>", "", report, flags=re.S)  # what a reader sees, not plotly.js
    for dump in ("run_id", "created_at", "None", "quality.perplexity", "sweep", "nan"):
        assert dump not in words, dump
    assert f"run {new_id} · float32" in report and "perplexity: " not in report.split("<h2>Runs on the Pareto front")[1]
    assert "faster decode (significant, 95 % CI" in report and "worse (significant, 95 % CI" in report
    assert "(95 % CI " in report.split("<h2>Runs on the Pareto front")[1]  # the front with its intervals
    assert "a trade-off: significantly different on both axes" in report
    assert "on the machine that made this report only (a local address)" in report


def test_links_say_when_they_are_local():
    assert "a local address" in link_words("http://127.0.0.1:8501/compare?runs=1,2")
    assert "a local address" in link_words("http://localhost:8501/explore")
    shared = link_words("https://latencylab.example.org/compare?runs=1,2")
    assert "local" not in shared and 'href="https://latencylab.example.org/compare?runs=1,2"' in shared
    assert link_words(None) == ""
