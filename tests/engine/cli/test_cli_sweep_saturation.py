"""``python -m engine sweep --stop-at-saturation`` against the fake OpenAI server, made to serve one
request at a time (its latency grows with load): the sweep stops after the first saturated point."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from engine.cli.main import main
from storage import open_database
from storage.runs import list_runs
from storage.series import get_series
from tests.queue_server import one_at_a_time as queueing


@pytest.fixture(scope="module")
def one_at_a_time() -> Iterator[str]:
    with queueing(service_s=0.03) as url:
        yield url


def _args(url: str, db_url: str, *extra: str) -> list[str]:
    return [
        "sweep",
        "--db",
        db_url,
        "--model",
        "synthetic:smollm2-135m",
        "--engine",
        "openai",
        "--served-model",
        "ok",
        "--base-url",
        url,
        "--prompt-tokens",
        "4",
        "--output-tokens",
        "3",
        "--requests",
        "24",
        "--warmup",
        "0",
        *extra,
    ]


def _not_json(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def test_a_rate_sweep_stops_after_the_first_saturated_point(one_at_a_time, db_url, capfd) -> None:
    # given out of order: --stop-at-saturation runs them in increasing order
    args = _args(one_at_a_time, db_url, "--rates", "800,8,400,inf", "--sweep", "sat", "--stop-at-saturation")
    assert main([*args, "--json"]) == 0
    obj = json.loads(capfd.readouterr().out, parse_constant=_not_json)  # strict JSON: no Infinity
    assert [p["point"] for p in obj["points"]] == ["rate 8/s", "rate 400/s"]
    low, high = obj["points"]
    assert low["saturation"]["saturated"] is False, low["saturation"]
    assert high["saturation"]["saturated"] is True, high["saturation"]
    # the queue grew (in flight, or TTFT from the due time when every request was due within a latency)
    assert " grew " in high["saturation"]["reason"] and " req/s < offered " in high["saturation"]["reason"]
    assert obj["stopped_because"] == f"saturated at 400 req/s: {high['saturation']['reason']}"
    assert [(p["point"], p["load"]) for p in obj["not_run"]] == [("rate 800/s", 800.0), ("max rate", None)]
    assert all(
        p["reason"].startswith(f"not run: saturated at 400 req/s (run {high['run_id']})") for p in obj["not_run"]
    )
    db = open_database(db_url)
    assert len(list_runs(db)) == 2
    stop = get_series(db, high["run_id"], "sweep_stop")
    assert stop["load"] == 400 and [p["point"] for p in stop["not_run"]] == ["rate 800/s", "max rate"]
    assert get_series(db, low["run_id"], "saturation")["saturated"] is False


def test_the_table_says_where_it_stopped(one_at_a_time, db_url, capfd) -> None:
    assert main(_args(one_at_a_time, db_url, "--rates", "400,800", "--stop-at-saturation")) == 0
    out = capfd.readouterr().out
    assert "\nstopped: saturated at 400 req/s: " in out
    assert "rate 800/s" in out and "not run: saturated at 400 req/s" in out
