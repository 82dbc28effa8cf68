"""``--quality`` on the command line: parsing, bad values (exit 2, one line), and one
real demo run whose accuracy is stored with it and printed by ``show --json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.common import spec_from_args
from engine.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[3]


def _spec(*argv: str):
    return spec_from_args(build_parser().parse_args(["run", "--model", "demo", *argv]))


def test_quality_options_build_the_spec(tmp_path: Path):
    spec = _spec(
        "--quality",
        "ppl, fidelity,task:arith.jsonl",
        "--quality-tokens",
        "512",
        "--quality-corpus",
        str(tmp_path / "c.txt"),
    )
    assert spec.quality.metrics == ("ppl", "fidelity", "task:arith.jsonl")
    assert spec.quality.budget_tokens == 512 and spec.quality.corpus == str(tmp_path / "c.txt")
    assert spec.quality.tasks == ("arith.jsonl",)
    assert not _spec().quality.enabled
    assert not _spec("--quality", "none").quality.enabled


def test_quality_from_a_spec_file_is_overridden_by_options(tmp_path: Path):
    file = tmp_path / "spec.json"
    file.write_text(json.dumps({"model": {"source": "demo"}, "quality": {"metrics": ["ppl"], "budget_tokens": 64}}))
    spec = spec_from_args(build_parser().parse_args(["run", "--spec", str(file), "--quality", "fidelity"]))
    assert spec.quality.metrics == ("fidelity",) and spec.quality.budget_tokens == 64


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--quality", "accuracy"], "unknown quality metric 'accuracy'"),
        (["--quality", "ppl", "--quality-tokens", "4"], "budget_tokens"),
        (["--quality", "task:bad name!"], "neither a .jsonl/.yaml file nor an lm-eval task name"),
        (["--model", "synthetic:smollm2-135m", "--quality", "ppl"], "synthetic weights have no accuracy"),
        (["--quality", "ppl", "--quality-corpus", "/no/such/corpus.txt"], "is not a file"),
        (["--quality", "task:/no/such/task.jsonl"], "does not exist"),
    ],
)
def test_bad_quality_values_exit_2_with_one_line(argv, message, db_url, capsys):
    args = [
        "run",
        "--model",
        "demo",
        "--prompt-tokens",
        "8",
        "--output-tokens",
        "2",
        "--requests",
        "1",
        *argv,
        "--db",
        db_url,
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err


def test_bad_quality_tokens_type_exits_2(capsys):
    assert main(["run", "--model", "demo", "--quality-tokens", "many"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


@pytest.mark.slow
def test_run_with_quality_stores_and_shows_accuracy(db_url):
    env = {**os.environ, "LATENCYLAB_DB_URL": db_url}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "run",
            "--model",
            "demo",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "4",
            "--requests",
            "2",
            "--quality",
            "ppl,fidelity",
            "--quality-tokens",
            "128",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    q = obj["quality"]
    assert q["perplexity"] > 1 and q["perplexity_tokens"] == 127
    assert q["kl_mean"] == pytest.approx(0.0, abs=1e-9) and q["top1_agreement"] == 1.0
    assert q["greedy_flip_rate"] == 0.0
    assert "accuracy: ppl" in proc.stderr  # the evaluating phase reports itself
    shown = subprocess.run(
        [sys.executable, "-m", "engine", "show", str(obj["run_id"]), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert json.loads(shown.stdout)["quality"]["perplexity"] == q["perplexity"]
