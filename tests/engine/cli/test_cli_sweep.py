"""``python -m engine sweep``: the shared grid builder, one job process per point, the CLI's output kept."""

from __future__ import annotations

import json
import os
import re

from engine.cli.main import main
from storage import open_database
from storage.runs import get_run, list_runs

QUICK = ["--prompt-tokens", "4", "--output-tokens", "3", "--requests", "3", "--warmup", "0"]


def _sweep(fake_openai: str, db_url: str, *extra: str) -> list[str]:
    openai = ["--model", "synthetic:smollm2-135m", "--engine", "openai", "--served-model", "ok"]
    return ["sweep", "--db", db_url, *openai, "--base-url", fake_openai, *QUICK, *extra]


def test_every_point_runs_in_its_own_process(fake_openai, db_url, capfd) -> None:
    assert main([*_sweep(fake_openai, db_url, "--rates", "100,inf", "--sweep", "iso"), "--json"]) == 0
    out, err = capfd.readouterr()
    obj = json.loads(out)
    assert [p["point"] for p in obj["points"]] == ["rate 100/s", "max rate"]
    pids = [int(pid) for pid in re.findall(r"\[iso\] running in process (\d+)", err)]
    assert len(pids) == 2 and len(set(pids)) == 2 and os.getpid() not in pids
    runs = list_runs(open_database(db_url))
    assert sorted(r.id for r in runs) == sorted(p["run_id"] for p in obj["points"])
    assert {r.sweep for r in runs} == {"iso"} and {r.status for r in runs} == {"done"}


def test_concurrency_sweep_prints_its_table(fake_openai, db_url, capfd) -> None:
    assert main(_sweep(fake_openai, db_url, "--concurrencies", "1,2", "--sweep", "conc")) == 0
    out = capfd.readouterr().out
    assert out.startswith("sweep conc\npoint")
    assert re.search(r"^concurrency 1 ", out, re.M) and re.search(r"^concurrency 2 ", out, re.M)
    db = open_database(db_url)
    assert sorted(get_run(db, r.id).spec["workload"]["max_concurrency"] for r in list_runs(db)) == [1, 2]


def test_a_sweep_that_cannot_run_is_refused_before_anything_runs(db_url, capsys) -> None:
    # a knob nothing would use is refused (exit 2, one line) before any point's process starts
    args = ["sweep", "--db", db_url, "--model", "demo", "--rates", "1", "--prompt-length-spread", "0.5"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "prompt_length_spread is only used with prompt_length=uniform or normal" in err
    assert len(err.splitlines()) == 1 and list_runs(open_database(db_url)) == []
