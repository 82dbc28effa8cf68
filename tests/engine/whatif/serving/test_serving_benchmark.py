"""benchmarks/simulator_speed.py: bad options are one argparse error (exit 2); a small run prints its table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[4] / "benchmarks" / "simulator_speed.py"


def _bench():
    spec = importlib.util.spec_from_file_location("simulator_speed", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--rate", "0"], "--rate: '0' must be above 0"),
        (["--requests", "many"], "'many' is not an integer"),
        (["--hardware", "tpu-v9"], "not in the catalog"),
        (["--prefixes", "4"], "go together"),
        (["--model", "synthetic:nope"], "--model: unknown architecture"),
        (["--seed", "-1"], "--seed -1 must be 0 or more"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        _bench().parse_args(argv)
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("simulator_speed.py: error:") and says in error


def test_a_small_run_prints_its_table(capsys):
    bench = _bench()
    assert bench.main(bench.parse_args(["--requests", "40", "--prefixes", "2", "--prefix-tokens", "300"])) == 0
    out = capsys.readouterr().out
    assert "40 requests at 20/s" in out and "simulate" in out and "prefix hit rate" in out
