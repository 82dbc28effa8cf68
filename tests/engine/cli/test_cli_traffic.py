"""Traffic like production from the command line: traces on their own schedule, datasets, sessions,
cancellations, against the tests' fake OpenAI-compatible server (loopback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.main import main


def _run(db_url: str, url: str, *extra: str, model: str = "synthetic:smollm2-135m") -> list[str]:
    return ["run", "--db", db_url, "--json", "--model", model, "--engine", "openai", "--base-url", url,
            "--served-model", "ok", "--warmup", "0", *extra]  # fmt: skip


def _chat(tmp_path: Path) -> str:
    convs = [
        {"conversations": [{"from": "human", "value": f"Name a {w}."}, {"from": "gpt", "value": "one two three"}]}
        for w in ("colour", "fruit", "tree")
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(convs))
    return str(path)


def _mooncake(tmp_path: Path, n: int = 6, bad_line: int | None = None) -> str:
    lines = []
    for i in range(n):
        row = {"timestamp": 100 * i, "input_length": 30, "output_length": 3 + i % 2, "hash_ids": [1 if i % 2 else 2]}
        lines.append("{not json" if bad_line == i + 1 else json.dumps(row))
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_trace_is_replayed_on_its_schedule_with_its_lengths(fake_openai, db_url, tmp_path, capsys) -> None:
    assert main(_run(db_url, fake_openai, "--trace", _mooncake(tmp_path), "--time-scale", "4")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "done" and out["completed"] == 6
    assert out["provenance"]["request_source"]["rows"] == 6 and out["spec"]["workload"]["traffic"]["source_sha256"]
    assert out["spec"]["workload"]["requests"] == 1_000_000 and out["spec"]["workload"]["traffic"]["source"] == "trace"
    from storage import open_database
    from storage.runs import get_requests

    records = get_requests(open_database(db_url), out["run_id"])
    assert [r.requested_output_tokens for r in records] == [3, 4, 3, 4, 3, 4]
    due = [(r.arrival_ns - records[0].arrival_ns) / 1e9 for r in records]
    assert due == pytest.approx([0, 0.025, 0.05, 0.075, 0.1, 0.125], abs=1e-6)  # 100 ms apart, 4x as fast
    assert max((r.send_ns - r.arrival_ns) / 1e6 for r in records) < 50  # sent on schedule


def test_a_malformed_row_deep_in_a_trace_is_one_line_and_nothing_is_stored(
    fake_openai, db_url, tmp_path, capsys
) -> None:
    from storage import open_database
    from storage.runs import count_runs

    code = main(_run(db_url, fake_openai, "--trace", _mooncake(tmp_path, n=300, bad_line=250)))
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress lines: one line says why
    assert code == 2 and last.startswith("error: ") and "trace.jsonl line 250: not JSON" in last
    assert count_runs(open_database(db_url)) == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--trace", "/nonexistent/t.jsonl"), "does not exist"),
        (("--trace", "TRACE", "--rate", "2", "--arrival", "poisson"), "own schedule"),
        (("--trace", "TRACE", "--trace-window", "x:y"), "START:DURATION"),
        (("--dataset", "DATA", "--dataset-format", "text"), "dataset_column"),
        (("--cancel-rate", "0.5"), "cancel_after_ms"),
    ],
)
def test_bad_traffic_options_are_one_line(fake_openai, db_url, tmp_path, capsys, extra, message) -> None:
    trace, data = _mooncake(tmp_path), tmp_path / "d.json"
    data.write_text("[]")
    args = [trace if a == "TRACE" else str(data) if a == "DATA" else a for a in extra]
    assert (
        main(
            _run(db_url, fake_openai, "--prompt-tokens", "4", *args)
            if "--cancel-rate" in extra
            else _run(db_url, fake_openai, *args)
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_cancelled_requests_are_counted_apart(fake_openai, db_url, capsys) -> None:
    extra = ("--prompt-tokens", "4", "--output-tokens", "40", "--requests", "12", "--arrival", "max",
             "--cancel-rate", "0.5", "--cancel-after-ms", "20")  # fmt: skip
    assert main(_run(db_url, fake_openai, *extra)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cancelled"] >= 2 and out["completed"] + out["cancelled"] == 12 and out["failed"] == 0
    assert out["ttft_ms"]["n"] == out["completed"]  # cancelled requests are out of the latency figures


@pytest.mark.slow
def test_a_sweep_of_a_dataset_over_the_openai_client(tmp_path, fake_openai, db_url, capsys) -> None:
    from engine.cli.main import main

    args = ["sweep", "--db", db_url, "--json", "--model", "demo", "--engine", "openai", "--base-url", fake_openai,
            "--served-model", "ok", "--dataset", _chat(tmp_path), "--requests", "3", "--warmup", "0",
            "--rates", "50,inf", "--sweep", "dataset-rates"]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["point"] for p in out["points"]] == ["rate 50/s", "max rate"]
    assert all(p["status"] == "done" for p in out["points"]), out["points"]
