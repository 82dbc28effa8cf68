"""``python -m engine capacity``: bad options exit 2 in one line with nothing stored; a small plan prints its
table (predicted, uncalibrated, priced from the catalog) and the answer, or one JSON document."""

from __future__ import annotations

import json

import pytest

from engine.cli.main import VERB_MODULES, main
from storage import open_database
from storage.runs import list_runs

TRAFFIC = ["--model", "synthetic:llama-3.2-1b", "--engine", "vllm", "--prompt-tokens", "256", "--output-tokens", "32"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--rate", "5"], "give an SLO: a limit on TTFT, TPOT or E2E"),
        (["--slo-ttft-ms", "500"], "give the traffic's rate: --rate R"),
        (["--rate", "5", "--slo-ttft-ms", "500", "--hardware", "tpu-v9"], "unknown hardware 'tpu-v9'"),
        (["--rate", "5", "--slo-ttft-ms", "500", "--tp", "0,2"], "--tp '0,2' is not a list of whole numbers"),
        (["--rate", "5", "--slo-ttft-ms", "500", "--price", "l40s=free"], "is not HARDWARE=USD per device-hour"),
        (["--rate", "5", "--slo-ttft-ms", "500", "--price", "h200=4"], "--price names hardware not planned: h200"),
        (["--rate", "5", "--slo-ttft-ms", "500", "--variant", "fp8:kv"], "'kv' is not KNOB=VALUE"),
        (["--rate", "5", "--slo-ttft-ms", "500", "--slo-percentile", "100"], "SLO percentile must lie between"),
        (["--rate", "5", "--slo-ttft-ms", "500", "--sample", "x"], "--sample"),
        (
            ["--rate", "5", "--slo-ttft-ms", "500", "--model", "synthetic:llama-3-70b", "--hardware", "l40s,a10"],
            "nothing to plan: base · l40s · TP1: weights of 141.1 GB per device do not fit",
        ),
        (
            [
                "--rate",
                "5",
                "--slo-ttft-ms",
                "500",
                "--prompt-tokens",
                "100000",
                "--requests",
                "3",
                "--hardware",
                "l4",
                "--knob",
                "gpu_memory_utilization=0.2",
            ],
            "the traffic's longest request: a prompt of 100000 tokens plus 32 output tokens needs 6252 KV blocks",
        ),
    ],  # fmt: skip
)
def test_bad_input_exits_2_in_one_line_and_stores_nothing(capsys, db_url, argv, needle):
    code, out, err = run(capsys, "capacity", "--db", db_url, *TRAFFIC, "--hardware", "l40s", *argv)
    assert code == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1 and out == ""
    assert list_runs(open_database(db_url), predicted=None) == []


def test_a_small_plan_prints_its_table_and_the_cheapest_configuration(capsys, db_url):
    argv = ["--rate", "20", "--hardware", "h100-sxm,l40s,mi300x", "--slo-ttft-ms", "300", "--slo-tpot-ms", "20"]
    code, out, err = run(capsys, "capacity", "--db", db_url, *TRAFFIC, *argv, "--sample", "200")
    assert code == 0, err
    assert out.startswith("Capacity plan (predicted by the serving simulator, not measured)")
    assert "base · h100-sxm · TP1" in out and "base · mi300x · TP1" in out
    assert "price of mi300x: no price given" in out and "lambda.ai/pricing" in out
    assert "calibration: uncalibrated" in out and "no error band claimed" in out
    assert out.rstrip().splitlines()[-1].startswith("Cheapest within TTFT p90 ≤ 300 ms and TPOT p90 ≤ 20 ms: ")
    assert "[1/3] sizing base · h100-sxm · TP1" in err and "done in" in err  # progress on stderr
    assert list_runs(open_database(db_url), predicted=None) == []  # nothing stored


def test_json_is_one_document_and_an_slo_nobody_meets_names_the_closest(capsys, db_url):
    argv = [
        "--rate",
        "20",
        "--hardware",
        "l40s,a10",
        "--slo-tpot-ms",
        "1",
        "--variant",
        "a",
        "--variant",
        "b:max_num_seqs=8",
    ]
    code, out, err = run(capsys, "capacity", "--db", db_url, *TRAFFIC, *argv, "--sample", "100", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (
        doc["predicted"] is True
        and doc["best"] is None
        and doc["closest"] in {c["configuration"] for c in doc["configurations"]}
    )
    assert [c["configuration"] for c in doc["configurations"]] == [
        "a · l40s · TP1", "a · a10 · TP1", "b · l40s · TP1", "b · a10 · TP1"
    ]  # fmt: skip
    assert doc["sentence"].startswith("No configuration meets TPOT p90 ≤ 1 ms at any rate; the closest is ")
    first = doc["configurations"][0]
    assert first["sustained_rate"] is None and first["closest"]["ratio"] > 1 and first["calibration"]["band"] is None
    assert doc["traffic"]["peak_rate"] == 20.0 and doc["slo"]["percentile"] == 90.0


def test_the_verb_is_registered():
    assert VERB_MODULES["engine.cli.capacity"] == ("capacity",)
