"""The request sources drive real runs: the transformers engine with the demo model (sessions that carry
the real replies, a dataset's reply lengths). vLLM: tests/engine/backends/vllm; the OpenAI client and a
sweep: tests/engine/cli/test_cli_traffic.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _chat(tmp_path: Path) -> str:
    convs = [
        {"conversations": [{"from": "human", "value": f"Name a {w}."}, {"from": "gpt", "value": "one two three"},
                           {"from": "human", "value": "Another one?"}, {"from": "gpt", "value": "four five"}]}
        for w in ("colour", "fruit", "tree")
    ]  # fmt: skip
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(convs))
    return str(path)


def test_sessions_on_the_transformers_engine(tmp_path, db, demo_folder) -> None:
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec
    from storage.runs import get_requests, get_run

    spec = parse_job_spec(
        {"model": {"source": "demo"},
         "workload": {"dataset": _chat(tmp_path), "multi_turn": True, "requests": 4, "warmup_requests": 1}}
    )  # fmt: skip
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    run = get_run(db, result.run_id)
    measured = [r for r in get_requests(db, result.run_id) if not r.warmup]
    assert [(r.session, r.turn) for r in measured] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [r.requested_output_tokens for r in measured] == [3, 2, 3, 2]  # the dataset's reply lengths
    assert measured[1].prompt_tokens > measured[0].prompt_tokens + measured[0].output_tokens  # the real reply
    assert [t["turn"] for t in run.metrics["turns"]] == [0, 1] and run.metrics["turns"][0]["n"] == 2
    assert run.spec["workload"]["traffic"]["source_sha256"] and run.provenance["request_source"]["sessions"] == 2
