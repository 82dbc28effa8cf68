"""``python -m engine simulate``: bad input exits 2 in one line with nothing stored; the demo model on this
machine's CPU gives a predicted run whose JSON has a measured run's shape, plus predicted and its band."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.cli.main import VERB_MODULES, main
from engine.measure.metrics import compute_metrics
from engine.measure.records import RequestRecord, RunRecord
from engine.report.results import result_object
from storage import open_database
from storage.runs import NewRun, get_run, list_runs, save_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "whatif"))
from whatif_seed import save_cpu_measurement  # the what-if tests' measured test CPU


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cpu_db(db, db_url):
    save_cpu_measurement(db)
    return db_url


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--hardware", "tpu-v9"], "unknown hardware 'tpu-v9'"),
        (
            ["--engine", "openai", "--base-url", "http://127.0.0.1:9/v1", "--served-model", "m"],
            "models the transformers and vllm engines",
        ),
        (
            ["--model", "synthetic:llama-3-8b", "--engine", "vllm", "--dtype", "float32", "--hardware", "rtx-4090"],
            "weights of 32.1 GB per device do not fit",
        ),
        (["--model", "synthetic:llama-3.2-1b", "--engine", "vllm", "--knob", "prompt_tokens=1"], "prompt_tokens"),
        (
            ["--model", "synthetic:llama-3.2-1b", "--engine", "vllm", "--prompt-tokens", "20000"],
            "needs 157 KV blocks of 128 tokens",
        ),
        (
            ["--model", "synthetic:smollm2-135m", "--engine", "vllm", "--hardware", "h100-sxm", "--tp", "2"],
            "not divisible by tensor parallel 2",
        ),
        (["--calibration-runs", "x,1"], "--calibration-runs 'x,1' is not a list of run ids"),
    ],  # fmt: skip
)
def test_bad_input_exits_2_in_one_line_and_stores_nothing(capsys, cpu_db, argv, needle):
    code, out, err = run(capsys, "simulate", "--db", cpu_db, "--model", "demo", "--engine", "vllm-server", *argv)
    assert code == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1 and out == ""
    assert list_runs(open_database(cpu_db), predicted=None) == []


def test_without_a_measured_cpu_the_default_hardware_says_how_to_measure_it(capsys, db_url):
    code, _, err = run(capsys, "simulate", "--db", db_url, "--model", "demo", "--engine", "vllm-server")
    assert code == 2 and "python -m engine calibrate" in err


def _measured_result(db) -> dict:
    """A measured run's result object, as the runner stores one (figures from the same metric code)."""
    records = [
        RequestRecord(index=i, arrival_ns=0, send_ns=0, prompt_tokens=8, chunk_ns=[5_000_000, 9_000_000, 12_000_000])
        for i in range(4)
    ]
    for r in records:
        r.chunk_tokens = [1, 1, 1]
    metrics = compute_metrics(RunRecord(0, 20_000_000, records))
    metrics["load"] = {"arrival": "poisson"}
    metrics["noise_flags"] = []  # the runner always writes them
    run_id = save_run(db, NewRun("done", {}, "fp", "demo", "vllm-server", "cpu", metrics=metrics, requests=records))
    return result_object(get_run(db, run_id))


def test_the_demo_model_on_this_cpu_is_a_predicted_run_shaped_as_a_measured_one(capsys, cpu_db):
    argv = ["--engine", "vllm-server", "--requests", "30", "--arrival", "poisson", "--rate", "3", "--json"]
    code, out, err = run(capsys, "simulate", "--db", cpu_db, "--model", "demo", *argv)
    assert code == 0, err
    obj = json.loads(out)
    assert obj["predicted"] is True and obj["band"] is None  # no measured run here: uncalibrated, no band
    assert obj["prediction"]["label"].startswith("uncalibrated") and obj["prediction"]["hardware"] == "local:cpu"
    assert obj["device"] == "local:cpu" and obj["ttft_ms"]["p50"] > 0 and obj["ttft_ms"]["n"] == 30
    assert "calibrating" in err and "simulated" in err  # progress on stderr
    measured = _measured_result(open_database(cpu_db))
    assert set(obj) - {"band", "prediction", "schedule"} == set(measured) - {"schedule"}  # schedule: with due times
    assert set(obj["ttft_ms"]) == set(measured["ttft_ms"])
    db = open_database(cpu_db)
    assert [r.id for r in list_runs(db)] == [measured["run_id"]]  # measured listings leave it out
    assert [r.id for r in list_runs(db, predicted=True)] == [obj["run_id"]]


def test_runs_lists_predicted_runs_only_when_asked(capsys, cpu_db):
    code, out, err = run(capsys, "simulate", "--db", cpu_db, "--model", "demo", "--engine", "vllm-server", "--json")
    assert code == 0, err
    predicted_id = json.loads(out)["run_id"]
    assert run(capsys, "runs", "--db", cpu_db, "--json")[1].strip() in ("[]", "")
    [row] = json.loads(run(capsys, "runs", "--db", cpu_db, "--predicted", "--json")[1])
    assert row["run_id"] == predicted_id and row["predicted"] is True
    assert "PREDICTED" in run(capsys, "runs", "--db", cpu_db, "--all")[1]


def test_the_verb_is_registered():
    assert VERB_MODULES["engine.cli.simulate"] == ("simulate",)
