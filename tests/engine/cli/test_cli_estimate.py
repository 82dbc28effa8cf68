"""``python -m engine estimate`` / ``calibrate``: JSON output, the table, bad input exits 2 with one line."""

from __future__ import annotations

import json

import pytest

from engine.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_estimate_json(capsys, db_url):
    code, out, err = run(
        capsys,
        "estimate",
        "--db",
        db_url,
        "--model",
        "synthetic:llama-3-8b",
        "--hardware",
        "a100-80gb,h100-sxm",
        "--dtype",
        "bf16",
        "--kv-dtype",
        "fp8",
        "--batch-size",
        "2",
        "--prompt-tokens",
        "256",
        "--output-tokens",
        "64",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["parameters"] == 8_030_261_248 and data["calibrated"] is False
    a100, h100 = data["estimates"]
    assert a100["hardware"] == "a100-80gb" and a100["fits"] is True
    assert a100["memory_bytes"]["weights"] == pytest.approx(16_060_522_496)
    assert a100["memory_bytes"]["kv_per_token"] == 65_536
    assert a100["calibration"].startswith("uncalibrated") and a100["band"] is None
    assert h100["tpot_ms"] < a100["tpot_ms"] and a100["measured_runs"] == []


def test_estimate_table_and_catalog_listing(capsys, db_url):
    code, out, _ = run(capsys, "estimate", "--db", db_url, "--model", "demo", "--hardware", "l4")
    assert code == 0
    assert "TTFT ms" in out and out.count("\nl4 ") == 1 and "uncalibrated" in out
    code, out, _ = run(capsys, "estimate", "--db", db_url, "--list-hardware")
    assert code == 0 and "mi300x" in out and "source:" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--model", "synthetic:gpt-9"], "unknown architecture"),
        (["--model", "demo", "--hardware", "b200"], "unknown hardware 'b200'"),
        (["--model", "demo", "--dtype", "int3"], "precision 'int3'"),
        (["--model", "demo", "--tp", "3"], "tensor parallelism"),
        (["--model", "demo", "--batch-size", "x"], "is not a whole number"),
        (["--model", "demo", "--hardware", ","], "--hardware is empty"),
        (["--model", "demo", "--engine", "tensorrt"], "unknown engine 'tensorrt'"),
        (["--hardware", "l4"], "--model is required"),
        (["--model", "./no/such/folder"], "local folder with config.json"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, db_url, argv, needle):
    code, out, err = run(capsys, "estimate", "--db", db_url, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err


def test_calibrate_stores_a_measurement(capsys, db_url, monkeypatch):
    import engine.whatif.microbench as mb

    real = mb.run_microbench
    monkeypatch.setattr(mb, "run_microbench", lambda device: real(device, copy_mb=4, matmul_n=96, repeats=2))
    code, out, err = run(capsys, "calibrate", "--db", db_url, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["measurement_id"] == 1 and data["copy_gbs"] > 0 and data["groups"] == []
    code, out, _ = run(capsys, "estimate", "--db", db_url, "--model", "demo", "--hardware", "local:cpu", "--json")
    assert code == 0 and json.loads(out)["estimates"][0]["measured_hardware"] is True


def test_calibrate_bad_device(capsys, db_url):
    code, _, err = run(capsys, "calibrate", "--db", db_url, "--device", "tpu")
    assert code == 2 and err.count("\n") == 1


def _seed_mixed(db_url: str) -> dict[str, list[int]]:
    import sys
    from pathlib import Path

    sys.path.append(str(Path(__file__).resolve().parents[1] / "whatif"))
    from whatif_seed import seed_mixed

    from storage import open_database

    return seed_mixed(open_database(db_url))


def test_estimate_names_the_runs_left_out_and_overlays_only_matching_ones(capsys, db_url):
    ids = _seed_mixed(db_url)
    argv = ["estimate", "--db", db_url, "--model", "demo", "--hardware", "local:cpu"]
    code, out, err = run(capsys, *argv, "--prompt-tokens", "32", "--output-tokens", "16")
    assert code == 0, err
    assert (
        "4 runs left out: 2 Poisson load (not modelled), 1 speculative decoding (not modelled), "
        "1 torch.compile (not modelled)"
    ) in out
    assert "calibrated on 24 transformers/fp32 run(s)" in out
    code, out, _ = run(capsys, *argv, "--prompt-tokens", "32", "--output-tokens", "16", "--drop-layers", "6", "--json")
    data = json.loads(out)
    (est,) = data["estimates"]
    assert est["measured_runs"] == [ids["dropped"][0]] and data["recipe"]["drop_layers"] == 6
    assert {d["run"]: d["reason"] for d in data["left_out"]}[ids["speculative"][0]] == (
        "speculative decoding (not modelled)"
    )
    assert data["left_out_summary"].startswith("4 runs left out")


def test_dropping_every_layer_is_one_line(capsys, db_url):
    code, out, err = run(capsys, "estimate", "--db", db_url, "--model", "demo", "--drop-layers", "30")
    assert code == 2 and out == "" and err.count("\n") == 1 and "leaves none" in err
