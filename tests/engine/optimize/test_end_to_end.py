"""A small real study on the demo model: a worker process runs every trial as a job (with its
perplexity phase) and advances the study until its budget is spent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main
from storage import studies

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_two_trial_study_on_the_demo_model(db, db_url, tmp_path, demo_folder, capfd):
    argv = ["optimize", "--name", "e2e", "--model", "demo", "--prompt-tokens", "16", "--output-tokens", "4"]
    argv += ["--requests", "2", "--quality-tokens", "128", "--max-ppl-increase-pct", "2", "--trials", "2"]
    argv += ["--knobs", "quantization", "--values", "quantization=none,torch_dynamic_int8", "--db", db_url]
    assert main(argv) == 0
    env = dict(os.environ, LATENCYLAB_DATA_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    worker = subprocess.run(
        [sys.executable, "-m", "engine", "worker", "--db", db_url, "--devices", "cpu", "--once"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert worker.returncode == 0, worker.stderr[-2000:]
    study = studies.get_study(db, "e2e")
    trials = studies.list_trials(db, study.id)
    assert study.status == "done", (study.note, worker.stderr[-2000:])
    assert [(t.number, t.status) for t in trials] == [(0, "complete"), (1, "complete")]
    base, int8 = trials
    assert base.feasible and base.measured["ppl_increase_pct"] == 0.0 and base.measured["tpot_ms_p50"] > 0
    assert int8.params == {"quantization": "torch_dynamic_int8"}
    assert not int8.feasible and int8.measured["ppl_increase_pct"] > 2.0  # torch dynamic int8: ~3x perplexity
    assert "study e2e: done (budget spent: 2 trial(s))" in worker.stderr
