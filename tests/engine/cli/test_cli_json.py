"""``--json``: stdout holds exactly one JSON document for every verb and engine; log lines of
the engine, of libraries and of child processes go to stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import runs as runs_verb
from engine.cli.main import main

REPO = Path(__file__).resolve().parents[3]
QUICK = ["--prompt-tokens", "4", "--output-tokens", "3", "--requests", "2", "--warmup", "0"]


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def test_noise_from_python_the_fd_and_a_child_goes_to_stderr(db_url, capfd, monkeypatch) -> None:
    real = runs_verb.cmd_runs

    def noisy(args):  # what vLLM does: a logger on sys.stdout, and child processes that inherit fd 1
        print("python noise")
        os.write(1, b"fd noise\n")
        subprocess.run([sys.executable, "-c", "print('child noise')"], check=True)
        return real(args)

    monkeypatch.setattr(runs_verb, "cmd_runs", noisy)
    assert main(["runs", "--json", "--db", db_url]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out) == []
    assert "python noise" in err and "fd noise" in err and "child noise" in err
    print("after")  # stdout is back once the verb is over
    assert capfd.readouterr().out == "after\n"


def test_stdout_is_restored_after_an_error(db_url, capfd) -> None:
    assert main(["show", "999", "--json", "--db", db_url]) == 2
    out, err = capfd.readouterr()
    assert out == "" and "no run 999" in err
    print("after")
    assert capfd.readouterr().out == "after\n"


@pytest.mark.parametrize("verb", [["runs"], ["jobs"], ["knobs", "--engine", "vllm"]])
def test_listing_verbs_print_one_document(verb, db_url, capfd) -> None:
    assert main([*verb, "--json", "--db", db_url]) == 0
    json.loads(capfd.readouterr().out)


OPENAI = ["--model", "synthetic:smollm2-135m", "--engine", "openai", "--served-model", "ok"]


@pytest.mark.slow
def test_openai_run_and_sweep_print_one_document(fake_openai, db_url) -> None:
    proc = _cli("run", "--json", "--db", db_url, *OPENAI, "--base-url", fake_openai, *QUICK)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "done"
    proc = _cli("sweep", "--json", "--db", db_url, *OPENAI, "--base-url", fake_openai, *QUICK, "--rates", "50,inf")
    assert proc.returncode == 0, proc.stderr
    assert [p["status"] for p in json.loads(proc.stdout)["points"]] == ["done", "done"]


@pytest.mark.slow
def test_transformers_run_prints_one_document(db_url) -> None:
    proc = _cli("run", "--json", "--db", db_url, "--model", "demo", *QUICK)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["spec"]["recipe"]["engine"] == "transformers"


@pytest.mark.slow
@pytest.mark.alone
def test_vllm_run_prints_one_document_and_logs_to_stderr(db_url) -> None:
    """vLLM in process on synthetic weights (random weights of the catalog architecture: load_format=dummy, no
    tokenizer; the demo model's vLLM path is tests/engine/backends/vllm/test_vllm_cpu.py's): one JSON document."""
    proc = _cli("run", "--json", "--db", db_url, "--model", "synthetic:smollm2-135m", "--engine", "vllm",
                "--knob", "max_model_len=256", "--knob", "max_num_seqs=2", *QUICK)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    obj = json.loads(proc.stdout)  # before the fix, ~50 vLLM log lines came before it and ~170 after
    assert obj["status"] == "done" and obj["spec"]["recipe"]["engine"] == "vllm"
    assert "INFO" in proc.stderr  # vLLM's own log lines are still there, on stderr
    engine_args = obj["provenance"]["engine_args"]
    assert engine_args["load_format"] == "dummy" and engine_args["skip_tokenizer_init"] is True
    assert obj["tpot_ms"]["p50"] > 0
