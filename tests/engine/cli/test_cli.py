"""The command line: the README's commands, JSON output, and bad input (exit 2, one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main
from storage import open_database
from storage.runs import count_runs

REPO = Path(__file__).resolve().parents[3]


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_run_json_then_runs_and_show(db_url):
    proc = cli(
        "run",
        "--model",
        "demo",
        "--engine",
        "transformers",
        "--prompt-tokens",
        "16",
        "--output-tokens",
        "4",
        "--requests",
        "2",
        "--batch-size",
        "2",
        "--json",
        "--db",
        db_url,
    )
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)  # stdout holds only the JSON object
    for key in (
        "run_id",
        "status",
        "spec",
        "provenance",
        "ttft_ms",
        "tpot_ms",
        "itl_ms",
        "e2el_ms",
        "output_tokens_per_s",
        "requests_per_s",
        "tokens_per_s_per_user",
        "output_tokens_per_s_per_gpu",
        "goodput_requests_per_s",
        "peak_memory_bytes",
        "load_s",
        "quality",
    ):
        assert key in obj
    # DESIGN's keys, plus how sure each is (issue 14): samples, 95 % intervals, which are supported
    assert set(obj["ttft_ms"]) == {"mean", "p50", "p90", "p95", "p99", "n", "ci", "supported"}
    assert obj["status"] == "done" and obj["spec"]["workload"]["output_tokens"] == 4

    listed = cli("runs", "--json", env={"LATENCYLAB_DB_URL": db_url})  # env var instead of --db
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [obj["run_id"]]
    shown = cli("show", str(obj["run_id"]), "--db", db_url)
    assert shown.returncode == 0 and "TTFT" in shown.stdout and "TPOT" in shown.stdout
    shown_json = json.loads(cli("show", str(obj["run_id"]), "--json", "--db", db_url).stdout)
    assert shown_json["ttft_ms"] == obj["ttft_ms"]


BAD_INPUTS = [
    (["run", "--model", "nosuchmodel"], "is not a known source"),
    (["run", "--model", "/no/such/folder"], "does not exist"),
    (["run", "--model", "demo", "--requests", "0"], "requests"),
    (["run", "--model", "demo", "--output-tokens", "-3"], "output_tokens"),
    (["run", "--model", "demo", "--engine", "warp"], "unknown engine"),
    (["run", "--model", "demo", "--dtype", "float64"], "dtype"),
    (["run", "--model", "demo", "--prompt-tokens", "9000"], "context of 8192"),
    (["run", "--model", "demo", "--requests", "many"], "is not a whole number"),
    (["run", "--model", "demo", "--turbo"], "unrecognized arguments"),
    (["run"], "--model is required"),
    (["show", "abc"], "is not a whole number"),
    (["show", "999999"], "no run 999999"),
    (["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize(("args", "fragment"), BAD_INPUTS)
def test_bad_input_exits_2_with_one_line_and_stores_nothing(args, fragment, db_url, capsys):
    code = main([*args, "--db", db_url])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert fragment in err
    assert len(err.splitlines()) == 1, err
    assert count_runs(open_database(db_url)) == 0


def test_gguf_that_is_not_a_model(tmp_path, db_url, capsys):
    fake = tmp_path / "fake.gguf"
    fake.write_text("hello")
    assert main(["run", "--model", str(fake), "--db", db_url]) == 2
    assert "not a GGUF model" in capsys.readouterr().err


def test_bad_db_url_is_one_line(capsys):
    assert main(["runs", "--db", "notadb://x"]) == 2
    err = capsys.readouterr().err.strip()
    assert "database URL" in err and len(err.splitlines()) == 1


def test_knob_option_sets_any_recipe_field():
    from engine.cli.common import spec_from_args
    from engine.cli.main import build_parser

    args = build_parser().parse_args(
        [
            "run",
            "--model",
            "demo",
            "--knob",
            "drop_layers=4",
            "--knob",
            "quantization=torchao_int8_weight_only",
            "--knob",
            "compile=false",
        ]
    )
    spec = spec_from_args(args)
    assert spec.recipe.drop_layers == 4 and spec.recipe.quantization == "torchao_int8_weight_only"
    assert spec.recipe.compile is False


@pytest.mark.parametrize(
    ("knob", "fragment"),
    [("quantization=warp", "quantization"), ("nonsense", "NAME=VALUE"), ("turbo=1", "unknown field")],
)
def test_bad_knob_exits_2(knob, fragment, db_url, capsys):
    assert main(["run", "--model", "demo", "--knob", knob, "--db", db_url]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and len(err.splitlines()) == 1


def test_knobs_verb_says_what_a_device_cannot_run(capsys):
    assert main(["knobs", "--device", "cpu", "--json"]) == 0
    rows = {r["knob"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["quantization"]["choices"]["none"] is None
    assert "CUDA" in rows["quantization"]["choices"]["bnb_nf4"]
    assert main(["knobs", "--engine", "warp"]) == 2


@pytest.mark.parametrize("args", [["runs", "--limit", "-1"], ["jobs", "--limit", "0"], ["runs", "--limit", "x"]])
def test_limits_must_be_positive(args, db_url, capsys):
    assert main([*args, "--db", db_url]) == 2
    err = capsys.readouterr().err.strip()
    assert "--limit" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--slo-tpot-ms", "inf"],
        ["--slo-ttft-ms", "nan"],
        ["--arrival", "poisson", "--rate", "inf"],
        ["--engine", "vllm", "--knob", "gpu_memory_utilization=nan"],
    ],
)
def test_non_finite_numbers_exit_2_in_one_line_and_store_nothing(args, db_url, capsys):
    assert main(["run", "--model", "demo", *args, "--db", db_url]) == 2
    err = capsys.readouterr().err.strip()
    assert "finite number" in err and len(err.splitlines()) == 1, err
    assert count_runs(open_database(db_url)) == 0


def test_every_verb_names_its_module_so_a_command_imports_only_its_own() -> None:
    from engine.cli.main import VERB_MODULES, build_parser

    parser = build_parser()
    verbs = set(next(a for a in parser._actions if a.dest == "verb").choices)  # type: ignore[union-attr]
    assert verbs == {v for names in VERB_MODULES.values() for v in names}
    only_run = build_parser("run")
    assert set(next(a for a in only_run._actions if a.dest == "verb").choices) == {"run"}  # type: ignore[union-attr]
