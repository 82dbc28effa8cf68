"""``python -m engine optimize``: a study created from flags (its first trial queued), ``status``
and ``list`` as exactly one JSON document, pause/resume/stop, and bad input in one line (exit 2)."""

from __future__ import annotations

import json

import pytest

from engine.cli.main import main
from storage import jobs, studies

BASE = ["--model", "demo", "--device", "cpu", "--prompt-tokens", "16", "--output-tokens", "4", "--requests", "2"]
SEARCH = ["--knobs", "dtype,quantization", "--values", "quantization=none,torch_dynamic_int8"]


def _create(db_url: str, *extra: str) -> int:
    return main(
        [
            "optimize",
            "--name",
            "s1",
            *BASE,
            *SEARCH,
            "--max-ppl-increase-pct",
            "2",
            "--trials",
            "3",
            "--quality-tokens",
            "128",
            "--db",
            db_url,
            *extra,
        ]
    )


def test_create_queues_the_base_recipe_and_status_is_one_json_document(db_url, db, capfd):
    assert _create(db_url, "--json") == 0
    out, err = capfd.readouterr()
    doc = json.loads(out)
    assert doc["study"] == "s1" and doc["status"] == "running" and doc["objectives"] == ["tpot_ms_p50"]
    [trial] = doc["trials"]
    assert trial["trial"] == 0 and trial["status"] == "pending" and trial["recipe"].startswith("the base recipe")
    job = jobs.get_job(db, trial["job_id"])
    assert job.spec["quality"]["metrics"] == ["ppl"] and job.spec["quality"]["budget_tokens"] == 128
    assert "trial 0 queued as job" in err
    assert main(["optimize", "status", "s1", "--json", "--db", db_url]) == 0
    assert json.loads(capfd.readouterr().out)["trials"][0]["job_id"] == job.id
    assert main(["optimize", "list", "--json", "--db", db_url]) == 0
    assert [r["study"] for r in json.loads(capfd.readouterr().out)] == ["s1"]
    assert main(["optimize", "status", "s1", "--db", db_url]) == 0
    text = capfd.readouterr().out
    assert text.startswith("study s1: running") and "No feasible recipe yet" in text


def test_pause_resume_stop(db_url, db, capfd):
    assert _create(db_url) == 0
    capfd.readouterr()
    for action, status in (("pause", "paused"), ("resume", "running"), ("stop", "stopped")):
        assert main(["optimize", action, "s1", "--db", db_url]) == 0
        assert studies.get_study(db, "s1").status == status
    assert "1 job(s) in flight cancelled" in capfd.readouterr().err
    assert main(["optimize", "resume", "s1", "--db", db_url]) == 0  # said, not done: stopped is final
    assert "cannot resume" in capfd.readouterr().err and studies.get_study(db, "s1").status == "stopped"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*BASE], "name the knobs to search"),
        ([*BASE, "--knobs", "dtype,warp"], "warp: not a knob of engine transformers"),
        ([*BASE, "--knobs", "dtype", "--values", "dtype"], "--values 'dtype' is not NAME=VALUE"),
        ([*BASE, "--knobs", "drop_layers", "--values", "drop_layers=0,x"], "drop_layers='x' is not a value"),
        ([*BASE, "--knobs", "dtype", "--values", "dtype=float16"], "knob dtype has a single value on cpu"),
        ([*BASE, "--knobs", "dtype", "--objective", "speed"], "unknown objective 'speed'"),
        ([*BASE, "--knobs", "dtype", "--slo", "ttft_ms_p99=fast"], "the bound must be a number"),
        (["--model", "synthetic:smollm2-135m", "--knobs", "dtype", "--max-ppl-increase-pct", "1"], "no accuracy"),
        (["status", "nope"], "no study 'nope'"),
        (["pause"], "name the study"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(argv, message, db_url, db, capsys):
    assert main(["optimize", *argv, "--db", db_url]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert studies.list_studies(db) == [] and jobs.list_jobs(db) == []


def test_a_taken_name_is_refused(db_url, db, capsys):
    assert _create(db_url) == 0
    capsys.readouterr()
    assert _create(db_url) == 2
    assert "a study named 's1' exists already" in capsys.readouterr().err
