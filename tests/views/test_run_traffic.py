"""The Run page's traffic section (AppTest, seeded runs): the source in words, TTFT per turn of sessions,
and send minus due for a trace."""

from __future__ import annotations

import json

from seed_runs import MS, make_requests, make_run, open_page, spec_dict

from engine.measure.metrics import compute_metrics, latency_group
from engine.measure.records import RunRecord
from engine.spec import parse_job_spec
from storage.runs import NewRun, save_run

SHA = "ab" * 32


def _titles(at) -> list[str]:  # type: ignore[no-untyped-def]
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def _bodies(at) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(m.value for m in at.markdown)


def test_a_sessions_run_shows_ttft_per_turn(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    turns = [
        {"turn": t, "n": 8, "prompt_tokens_mean": 40.0 * (t + 1), "cached_share": 0.5 if t else 0.0,
         "ttft_ms": latency_group([ms + t * 5 for ms in range(40, 48)]), "e2el_ms": latency_group([100.0] * 8)}
        for t in range(3)
    ]  # fmt: skip
    workload = {"prompt_tokens": None, "dataset": "/data/chat.json", "multi_turn": True, "source_sha256": SHA}
    source = {"name": "sessions", "records_read": 10, "sessions": 8, "turns": 24, "skipped": {"no user turn": 2}}
    run = make_run(db, workload=workload, provenance={"request_source": source}, extra_metrics={"turns": turns})
    at = open_page("views/run.py", run=str(run))
    assert not at.exception
    assert "Traffic" in [s.value for s in at.subheader]
    text = _bodies(at)
    assert "multi-turn sessions from chat.json (sharegpt, sha256 abababababab…)" in text
    assert "sessions: 8, 24 turns" in text and "skipped: 2 (no user turn)" in text
    assert "turn 2: 8 requests, prompt 80 tokens on average, TTFT p50 48.5 ms, 50% of prompt tokens" in text
    assert "TTFT p50 per turn (95 % CI)" in _titles(at)
    assert not any("Schedule adherence" in t for t in _titles(at))  # a closed loop has no schedule


def test_a_trace_run_shows_send_minus_due(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    requests = make_requests(n=12, gap_ms=5)
    for i, r in enumerate(requests):
        r.arrival_ns = r.send_ns - (i % 4) * MS  # sent 0 to 3 ms after its due time
    workload = {"prompt_tokens": None, "trace": "/data/mooncake.jsonl", "time_scale": 10, "source_sha256": SHA}
    spec = spec_dict(workload=workload)
    measured = [r for r in requests if not r.warmup]
    metrics = compute_metrics(
        RunRecord(measured[0].send_ns, measured[-1].chunk_ns[-1], requests, warmup_requests=1, due_times=True)
    )
    source = {"name": "trace", "format": "mooncake", "rows": 12, "duration_s": 1.1, "shared_blocks": 0.4,
              "skipped": {"0 output tokens": 3}, "clipped": 2}  # fmt: skip
    run = save_run(
        db,
        NewRun(status="done", spec=spec, fingerprint=parse_job_spec(spec).fingerprint(), model="demo",
               engine="transformers", device="cpu", device_name="test CPU", provenance={"request_source": source},
               metrics=metrics, requests=requests),
    )  # fmt: skip
    at = open_page("views/run.py", run=str(run))
    assert not at.exception
    text = _bodies(at)
    assert "trace replay mooncake.jsonl (mooncake, sha256 abababababab…), 10x faster" in text
    assert "rows replayed: 12 over 1.1 s" in text and "prompt blocks an earlier row already sent: 40%" in text
    assert "skipped: 3 (0 output tokens)" in text and "clipped to the model's context: 2 requests" in text
    assert "send minus due: p50 1.50 ms, p99 3.00 ms, max 3.00 ms over 12 requests" in text
    assert "Schedule adherence: send minus due" in _titles(at)
