"""Traces in their published formats (Mooncake JSONL, Azure LLM inference CSV, BurstGPT CSV)
read into rows on the trace's own schedule; windows and time scales; and one clear line for
every kind of bad input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from engine.data.traces import Trace, TraceRow, read_trace, time_scale, window
from engine.spec import SpecError

# As published by kvcache-ai/Mooncake (FAST'25): requests 2 and 4 share their first blocks with 1.
MOONCAKE = [
    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": list(range(46, 60))},
    {"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [*range(46, 57), 2353, 2354]},
    {"timestamp": 30535, "input_length": 655, "output_length": 52, "hash_ids": [3001, 3002]},
    {"timestamp": 40000, "input_length": 1024, "output_length": 300, "hash_ids": [46, 47]},
]
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.0000000,879,2
2023-11-16 18:16:03.1000001,91,0
"""
BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,0,1087,Conversation log
118,GPT-4,417,276,693,Conversation log
118,ChatGPT,1360,0,1360,API log
200.5,ChatGPT,2022,323,2345,API log
"""


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _mooncake(tmp_path: Path, rows: list) -> Path:
    return _write(tmp_path / "mooncake_trace.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def test_mooncake_rows_keep_the_schedule_and_the_shared_hash_ids(tmp_path):
    path = _mooncake(tmp_path, MOONCAKE)
    trace = read_trace(path, "mooncake")
    assert isinstance(trace, Trace) and trace.skipped == {}
    assert trace.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [r.at_s for r in trace.rows] == [0.0, 3.053, 3.053, pytest.approx(12.518)]
    first, second, _, fourth = trace.rows
    assert (first.input_tokens, first.output_tokens) == (6955, 52)
    assert first.hash_ids[:11] == second.hash_ids[:11] and first.hash_ids[11] != second.hash_ids[11]
    assert fourth.hash_ids == first.hash_ids[:2]
    assert [r.where for r in trace.rows] == [f"{path} line {n}" for n in (1, 2, 3, 4)]


def test_azure_timestamps_keep_all_seven_fraction_digits(tmp_path):
    trace = read_trace(_write(tmp_path / "AzureLLMInferenceTrace_code.csv", AZURE), "azure")
    assert [r.at_s for r in trace.rows] == pytest.approx([0.0, 4.314579, 4.31941], abs=1e-9)
    assert trace.rows[1].at_s == (9951690 - 6805900) / 1e7 + 4  # exact to 100 ns
    assert [(r.input_tokens, r.output_tokens, r.hash_ids) for r in trace.rows][0] == (374, 44, None)
    assert trace.skipped == {"0 output tokens": 1}


def test_azure_timestamps_with_a_utc_offset(tmp_path):
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,10,1\n2024-05-10 02:00:01+02:00,10,1\n"
    trace = read_trace(_write(tmp_path / "azure_2024.csv", text), "azure")
    assert [r.at_s for r in trace.rows] == pytest.approx([0.0, 0.99007])


def test_burstgpt_skips_and_counts_the_failures_in_the_trace(tmp_path):
    trace = read_trace(_write(tmp_path / "BurstGPT_1.csv", BURSTGPT), "burstgpt")
    assert [(r.at_s, r.input_tokens, r.output_tokens) for r in trace.rows] == [
        (0.0, 472, 18),
        (113.0, 417, 276),
        (195.5, 2022, 323),
    ]
    assert trace.skipped == {"failed in the trace (0 response tokens)": 2}
    assert trace.rows[1].where.endswith("BurstGPT_1.csv line 4")


def test_a_window_and_a_row_cap_are_applied_while_reading(tmp_path):
    path = _write(tmp_path / "b.csv", BURSTGPT)
    windowed = read_trace(path, "burstgpt", start_s=100, duration_s=100)
    assert [(r.at_s, r.input_tokens) for r in windowed.rows] == [(13.0, 417), (95.5, 2022)]
    assert [r.at_s for r in read_trace(path, "burstgpt", max_rows=2).rows] == [0.0, 113.0]
    with pytest.raises(SpecError, match=r"no row is due between 300 s and 310 s of the trace"):
        read_trace(path, "burstgpt", start_s=300, duration_s=10)


def test_window_and_time_scale_are_pure_cuts_of_rows():
    rows = [TraceRow(t, 10, 5, None, f"t line {i}") for i, t in enumerate([0.0, 1.0, 2.5, 4.0, 9.0], 1)]
    assert [r.at_s for r in window(rows, 1.0, 3.0)] == [0.0, 1.5]  # [1, 4): the row due at 4 s is out
    assert [r.where for r in window(rows, 1.0, 3.0)] == ["t line 2", "t line 3"]
    assert [r.at_s for r in window(rows, 4.0)] == [0.0, 5.0]
    assert [r.at_s for r in time_scale(rows, 2)] == [0.0, 0.5, 1.25, 2.0, 4.5]  # twice as fast
    assert [r.at_s for r in time_scale(rows, 0.5)][-1] == 18.0
    with pytest.raises(SpecError, match=r"time scale must be a number above 0"):
        time_scale(rows, 0)
    with pytest.raises(SpecError, match=r"window lasts more than 0 s"):
        window(rows, 0, -1)


# --- bad input: one line naming the file, the line or row, and the field ---


def test_bad_input_malformed_row(tmp_path):
    path = _write(tmp_path / "m.jsonl", json.dumps(MOONCAKE[0]) + '\n{"timestamp": 1, "input_length": \n')
    with pytest.raises(SpecError, match=r"m.jsonl line 2: not JSON \(Expecting value"):
        read_trace(path, "mooncake")
    with pytest.raises(SpecError, match=r"a.csv line 3: 2 fields, the header has 3$"):
        read_trace(_write(tmp_path / "a.csv", AZURE.replace(",396,109", ",396")), "azure")
    with pytest.raises(SpecError, match=r"a2.csv line 2: field 'TIMESTAMP': '16/11/2023 18:15' is not a date-time"):
        read_trace(
            _write(tmp_path / "a2.csv", AZURE.replace("2023-11-16 18:15:46.6805900", "16/11/2023 18:15")), "azure"
        )
    with pytest.raises(SpecError, match=r"trace.jsonl line 1: field 'hash_ids': 2 ids for 6955 input tokens; one per"):
        read_trace(_mooncake(tmp_path, [{**MOONCAKE[0], "hash_ids": [1, 2]}]), "mooncake")
    with pytest.raises(SpecError, match=r"line 1: field 'timestamp': 'soon' is not a number"):
        read_trace(_mooncake(tmp_path, [{**MOONCAKE[0], "timestamp": "soon"}]), "mooncake")


def test_bad_input_negative_length(tmp_path):
    with pytest.raises(SpecError, match=r"b.csv line 3: field 'Request tokens': '-5' is negative$"):
        read_trace(_write(tmp_path / "b.csv", BURSTGPT.replace("45,ChatGPT,1087", "45,ChatGPT,-5")), "burstgpt")
    with pytest.raises(SpecError, match=r"line 1: field 'output_length': -1 is negative$"):
        read_trace(_mooncake(tmp_path, [{**MOONCAKE[0], "output_length": -1}]), "mooncake")


def test_bad_input_non_integer_length(tmp_path):
    with pytest.raises(SpecError, match=r"line 1: field 'input_length': 6955.5 is not a whole number of tokens$"):
        read_trace(_mooncake(tmp_path, [{**MOONCAKE[0], "input_length": 6955.5}]), "mooncake")
    with pytest.raises(SpecError, match=r"a.csv line 2: field 'GeneratedTokens': 'many' is not a number$"):
        read_trace(_write(tmp_path / "a.csv", AZURE.replace(",374,44", ",374,many")), "azure")
    with pytest.raises(SpecError, match=r"field 'output_length': True is not a number$"):
        read_trace(_mooncake(tmp_path, [{**MOONCAKE[0], "output_length": True}]), "mooncake")
    integral = read_trace(_mooncake(tmp_path, [{**MOONCAKE[0], "input_length": 6955.0}]), "mooncake")
    assert integral.rows[0].input_tokens == 6955


def test_bad_input_timestamps_out_of_order(tmp_path):
    rows = [MOONCAKE[0], MOONCAKE[3], MOONCAKE[1]]
    with pytest.raises(
        SpecError,
        match=r"line 3: field 'timestamp': 9.465 s earlier than the row before \(.*line 2\); a trace's timestamps must not",
    ):
        read_trace(_mooncake(tmp_path, rows), "mooncake")
    swapped = BURSTGPT.replace("118,GPT-4", "4,GPT-4")
    with pytest.raises(SpecError, match=r"b.csv line 4: field 'Timestamp': 41 s earlier than the row before"):
        read_trace(_write(tmp_path / "b.csv", swapped), "burstgpt")


def test_bad_input_empty_file(tmp_path):
    with pytest.raises(SpecError, match=r"trace .*empty.jsonl is empty$"):
        read_trace(_write(tmp_path / "empty.jsonl", ""), "mooncake")
    with pytest.raises(SpecError, match=r"trace .*header.csv holds no rows$"):
        read_trace(_write(tmp_path / "header.csv", AZURE.splitlines()[0] + "\n"), "azure")
    with pytest.raises(SpecError, match=r"no row can be replayed \(2 failed in the trace \(0 response tokens\)\)"):
        read_trace(_write(tmp_path / "failed.csv", "\n".join(BURSTGPT.splitlines()[i] for i in (0, 2, 4))), "burstgpt")
    with pytest.raises(SpecError, match=r"trace .*missing.csv does not exist"):
        read_trace(tmp_path / "missing.csv", "azure")


def test_bad_input_unknown_or_missing_column(tmp_path):
    with pytest.raises(
        SpecError, match=r"b.csv line 1: field 'Response tokens': no such column \(the header, 6 fields, does not"
    ):
        read_trace(_write(tmp_path / "b.csv", BURSTGPT.replace("Response tokens", "Resp")), "burstgpt")
    with pytest.raises(SpecError, match=r"line 1: field 'output_length': missing$"):
        read_trace(_mooncake(tmp_path, [{"timestamp": 0, "input_length": 5}]), "mooncake")
    with pytest.raises(SpecError, match=r"trace format 'bailian' is not one of mooncake, azure, burstgpt"):
        read_trace(tmp_path / "b.csv", "bailian")


def test_bad_input_not_utf8(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(AZURE.encode().replace(b"879,2", b"879,2\xff"))
    with pytest.raises(SpecError, match=r"a.csv line 4 is not UTF-8"):
        read_trace(path, "azure")
