"""The Run page's server-metrics section (AppTest over a seeded run) and its pure helpers."""

from __future__ import annotations

import json

from seed_runs import make_requests, open_page
from series_seed import T0_NS, seed_run, server_series

from ui.server_metrics_view import client_in_flight, summary_line


def test_client_in_flight_is_a_step_line_of_the_measured_requests() -> None:
    requests = make_requests(n=3, warmup=1)
    xs, ys = client_in_flight(requests, T0_NS)
    assert max(ys) == 1 and ys[-1] == 0  # sent back to back: one at a time, none left at the end
    assert xs == sorted(xs) and xs[0] > 0  # the warm-up request is left out


def test_summary_line() -> None:
    assert summary_line(server_series()) == (
        "vllm, 5 scrapes every 500 ms: peak 2 running, 1 waiting · KV cache up to 50.0 % · prefix-cache hits 25 %"
    )
    assert summary_line({"source": "unknown", "t_s": [0.0], "interval_ms": 500, "fields": {}}).endswith(
        "no known metric names"
    )


def test_run_page_shows_the_server_beside_the_client(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    run_id = seed_run(db, {"server_metrics": server_series()})
    at = open_page("views/run.py", run=str(run_id))
    assert not at.exception
    assert "Server metrics" in [s.value for s in at.subheader]
    assert any("peak 2 running, 1 waiting" in c.value for c in at.caption)
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    server = next(f for f in figures if any(t.get("name") == "client: in flight" for t in f["data"]))
    names = [t["name"] for t in server["data"]]
    assert names == [
        "server: running",
        "server: waiting",
        "client: in flight",
        "KV cache used [%]",
        "prefix-cache hit rate [%]",
        "TTFT [ms]",
        "E2EL [ms]",
    ]
    assert server["data"][3]["y"][-1] == 50.0  # the fraction shown in %


def test_a_server_without_metrics_says_so(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    run_id = seed_run(db, {}, provenance={"host": "test", "server_metrics": "server has no /metrics (HTTP 404)"})
    at = open_page("views/run.py", run=str(run_id))
    assert "No server metrics: server has no /metrics (HTTP 404)." in [c.value for c in at.caption]
    plain = seed_run(db, {})  # an in-process engine: no section at all
    at = open_page("views/run.py", run=str(plain))
    assert "Server metrics" not in [s.value for s in at.subheader]
