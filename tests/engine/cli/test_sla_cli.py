"""``python -m engine sla``: bad input exits 2 with one line and stores nothing; a real search on the
demo model (probes run by a real worker, each a stored run in the sweep sla:NAME); ``sla status``."""

from __future__ import annotations

import json

import pytest

from engine.cli.main import main
from storage import jobs, open_database
from storage import sla as store
from storage.runs import get_run
from tests.engine.jobs.test_worker import start_worker, stop

TINY = ["--prompt-tokens", "8", "--output-tokens", "3", "--requests", "6", "--warmup", "1"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--slo", "fast"], "--slo: SLO term 'fast' is not METRIC_PCT=MS"),
        ([], "--slo: give an SLO"),
        (["--slo", "chat", "--goodput", "1.5"], "--goodput is a share of requests"),
        (["--slo", "chat", "--trials", "3"], "an SLA probe is one run: drop --trials"),
        (["--slo", "chat", "--axis", "concurrency", "--start", "2.5"], "starts at a whole number"),
        (["--slo", "chat", "--max-probes", "0"], "--max-probes"),
        (["--slo", "chat", "--resolution", "-1"], "resolution"),
        (["--slo", "chat", "--axis", "concurrency"], "transformers engine serves one request at a time"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_stores_nothing(db_url, capsys, extra, message) -> None:
    assert main(["sla", "--db", db_url, "--model", "demo", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    db = open_database(db_url)
    assert store.list_searches(db) == [] and jobs.list_jobs(db) == []


def test_status_and_stop_of_an_unknown_search(db_url, capsys) -> None:
    assert main(["sla", "status", "nope", "--db", db_url]) == 2
    assert capsys.readouterr().err.strip() == "error: no SLA search named 'nope'"
    assert main(["sla", "status", "--db", db_url]) == 2
    assert "needs the search's name" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.alone
def test_a_search_on_the_demo_model_runs_real_probes_to_an_answer(db_url, tmp_path, capfd, demo_folder) -> None:
    worker = start_worker(db_url, tmp_path)
    try:
        args = ["sla", "--db", db_url, "--model", "demo", *TINY, "--slo", "ttft_p99=60000", "--goodput", "0.5"]
        args += ["--start", "2", "--resolution", "1", "--max-probes", "2", "--name", "tiny", "--wait", "--json"]
        assert main(args) == 0
    finally:
        stop(worker)
    out, err = capfd.readouterr()
    report = json.loads(out)
    assert report["status"] == "done" and report["sweep"] == "sla:tiny"
    assert [(p["load"], p["status"]) for p in report["probes"]] == [(2.0, "passed"), (4.0, "passed")]
    assert report["answer"]["text"] == "at least 4 req/s at 50 % goodput (no failing load found)"
    assert "[tiny] probe 1 at 2 req/s: passed; probe 2 at 4 req/s: queued" in err
    db = open_database(db_url)
    for probe in report["probes"]:
        run = get_run(db, probe["run_id"])
        assert run.sweep == "sla:tiny" and run.status == "done"
        assert run.spec["workload"]["rate"] == probe["load"] and run.spec["workload"]["slo_ttft_ms"] == 60000
        assert run.metrics["goodput_fraction"] == probe["values"]["goodput_fraction"]
    assert main(["sla", "status", "tiny", "--db", db_url, "--json"]) == 0
    assert json.loads(capfd.readouterr().out)["answer"] == report["answer"]
    assert main(["sla", "status", "tiny", "--db", db_url]) == 0
    table = capfd.readouterr().out
    assert "answer: at least 4 req/s" in table and "passed" in table
