"""The worker's Prometheus endpoint: a real HTTP scrape, parsed with prometheus_client's own parser."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from seed_runs import make_run

from engine.jobs import exporter
from engine.jobs.exporter import single_devices, start_exporter


def _scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.fixture
def served(db, db_url) -> Iterator[tuple]:
    ends = []

    def start(**kw):
        ex = start_exporter(db_url, "w-test", ["cpu", "cuda:1+2"], 0, sampler=kw.pop("sampler", _sampler), **kw)
        ends.append(ex)
        return ex

    yield db, start
    for ex in ends:
        ex.stop()


def _sampler(device: str) -> dict[str, float]:
    if device == "cuda:2":
        raise RuntimeError("this GPU does not answer")
    return {"util_pct": 12.5 if device == "cpu" else 80.0, "temperature.c": 61.0, "broken": float("nan")}


def test_a_scrape_parses_and_holds_queue_devices_and_runs(served) -> None:
    from engine.spec import parse_job_spec
    from storage import jobs

    db, start = served
    old = make_run(db, name="old", ttft_ms=90, n=12)
    new = make_run(db, name="new", ttft_ms=40, n=12, seed=3)  # same spec: only the newest run is exported
    other = make_run(db, name="bf16", dtype="bfloat16", ttft_ms=30, n=12)
    jobs.submit(db, parse_job_spec({"model": {"source": "demo"}}))
    got = _scrape(start().port)

    assert [s.value for s in got["latencylab_worker_up"]] == [1.0]
    queue = {s.labels["status"]: s.value for s in got["latencylab_jobs"]}
    assert queue["queued"] == 1 and queue["running"] == 0
    assert {s.labels["device"]: s.value for s in got["latencylab_running_jobs"]} == {"cpu": 0, "cuda:1+2": 0}
    util = {s.labels["device"]: s.value for s in got["latencylab_device_util_pct"]}
    assert util == {"cpu": 12.5, "cuda:1": 80.0}  # cuda:2 failed to answer; NaN figures are left out
    assert "latencylab_device_temperature_c" in got and "latencylab_device_broken" not in got

    ids = {s.labels["fingerprint"]: s.value for s in got["latencylab_run_id"]}
    assert sorted(ids.values()) == sorted([new, other]) and old not in ids.values()
    ttft = [s for s in got["latencylab_run_ttft_seconds"] if s.labels["quantile"] == "0.5"]
    assert len(ttft) == 2 and all(0.02 < s.value < 0.06 for s in ttft)  # ms -> seconds
    sample = ttft[0]
    assert set(sample.labels) == {"fingerprint", "model", "engine", "device", "recipe", "quantile"}
    assert sample.labels["engine"] == "transformers" and "prompts" in sample.labels["recipe"]
    assert not [s for s in got["latencylab_run_ttft_seconds"] if s.labels["quantile"] == "0.99"]  # 12 requests
    assert {s.labels["quantile"] for s in got["latencylab_run_tpot_seconds"]} == {"0.5"}
    assert all(s.value > 0 for s in got["latencylab_run_output_tokens_per_second"])


def test_runs_exported_are_bounded_to_the_newest_specs(served, monkeypatch) -> None:
    db, start = served
    monkeypatch.setattr(exporter, "RUN_SPECS", 2)
    for i in range(4):
        make_run(db, batch_size=i + 1)
    got = _scrape(start().port)
    batches = sorted(s.labels["recipe"] for s in got["latencylab_run_id"])
    assert len(batches) == 2 and all("batch 3" in b or "batch 4" in b for b in batches)


def test_worker_down_and_running_jobs(served, db) -> None:
    from engine.spec import parse_job_spec
    from storage import jobs

    _db, start = served
    job_id = jobs.submit(db, parse_job_spec({"model": {"source": "demo"}}))
    jobs.register_worker(db, "w-test", "host", 1, ["cpu"])
    jobs.claim(db, "w-test", ["cpu"])
    jobs.progress(db, job_id, phase="measuring", fraction=0.25)
    got = _scrape(start(up=lambda: False).port)
    assert [s.value for s in got["latencylab_worker_up"]] == [0.0]
    (progress,) = got["latencylab_job_progress"]
    assert progress.labels == {"job_id": str(job_id), "device": "cpu", "phase": "measuring"} and progress.value == 0.25
    assert {s.labels["device"]: s.value for s in got["latencylab_running_jobs"]}["cpu"] == 1


def test_single_devices_of_the_slots() -> None:
    assert single_devices(["cpu", "cuda:0", "cuda:1+2", "cuda:2,3"]) == ["cpu", "cuda:0", "cuda:1", "cuda:2", "cuda:3"]


def test_the_basic_sampler_reads_the_cpu() -> None:
    sample = exporter.basic_sample("cpu")
    assert sample["memory_used_bytes"] > 0 and sample["load_avg_1m"] >= 0
    assert exporter.basic_sample("cuda:99") == {}  # no such GPU (or no driver): no figures


def test_cli_worker_serves_metrics_and_refuses_a_bad_port(db_url, capsys) -> None:
    from engine.cli.main import main

    assert main(["worker", "--once", "--devices", "cpu", "--metrics-port", "0", "--db", db_url]) == 0
    assert "Prometheus metrics at http://127.0.0.1:" in capsys.readouterr().err
    assert main(["worker", "--once", "--metrics-port", "70000", "--db", db_url]) == 2
    assert "--metrics-port: '70000' is not a port number (0..65535)" in capsys.readouterr().err


def test_cli_worker_refuses_a_port_in_use(db_url, capsys) -> None:
    import socket

    from engine.cli.main import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["worker", "--once", "--devices", "cpu", "--metrics-port", str(port), "--db", db_url]) == 2
    err = capsys.readouterr().err
    assert f"--metrics-port {port}: " in err and "Traceback" not in err
