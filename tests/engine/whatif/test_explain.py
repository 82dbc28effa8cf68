"""What-if says why (issue 34, item 7): an overhead-bound estimate states its bound in words, names the H200 runs
its priors come from, and sits beside the same row for the compiled static-cache recipe."""

from __future__ import annotations

import json

from engine.cli.main import main
from engine.whatif import explain
from engine.whatif.calibrate import Calibration
from engine.whatif.estimate import EstimateRecipe, EstimateWorkload, model_shape
from engine.whatif.hardware import catalog
from engine.whatif.query import comparison_rows, table_rows, what_if

GPUS = ("h100-sxm", "a100-80gb", "l40s", "rtx-4090")


def _rows(model: str, engine: str = "transformers") -> tuple[list[dict], list[dict]]:
    entries = catalog(None)
    result = what_if(
        model_shape(model),
        model,
        [entries[k] for k in GPUS],
        EstimateRecipe(engine=engine),
        EstimateWorkload(),
        calibration=Calibration(groups=[]),
    )
    return table_rows(result), comparison_rows(result)


def test_the_data_file_names_its_source_and_date_and_fits_the_compiled_recipe():
    data = explain.measurements()
    assert data["date"] == "2026-11-29" and "FIELD-NOTES" in data["source"] and len(data["runs"]) == 4
    f = explain.compiled_factors()  # 2.64 and 7.45 ms over floors of 0.58 and 3.77 ms
    assert 1.5 < f.step_overhead_ms < 2.0 and 0.5 < f.eff_bandwidth < 0.7


def test_an_overhead_bound_row_says_why_and_where_its_priors_come_from():
    rows, compared = _rows("synthetic:llama-3-8b")
    for r in rows:
        assert r["bound"] == "overhead/overhead" and r["ttft_ms"] < r["tpot_ms"]  # as measured on the H200
        assert "host overhead per step: on this engine the GPU and the model size barely change decode" in " ".join(
            r["lessons"]
        )
        assert "TTFT is the same on every GPU and can sit below TPOT" in r["lessons"][0]
        assert "50.0 ms overhead per step" in r["figures"] and "engine/whatif/priors_h200.json" in r["priors"]
    # the same question for the compiled static-cache recipe: not overhead-bound in decode, several times faster
    assert [c["hardware"] for c in compared] == list(GPUS)
    for r, c in zip(rows, compared, strict=True):
        assert "static cache + torch.compile" in c["recipe"] and c["tpot_ms"] < r["tpot_ms"] / 2
        assert c["bound"].endswith("/memory") and "memory-bandwidth-bound" in " ".join(c["lessons"])


def test_vllm_and_a_big_memory_bound_estimate_get_no_comparison_row():
    rows, compared = _rows("synthetic:llama-3-8b", engine="vllm")
    assert compared == [] and all(r["bound"].endswith("memory") for r in rows)
    assert all("documented factors" in r["priors"] for r in rows)


def test_the_cli_explains_the_bound_in_words_and_names_the_data(capsys, db_url):
    assert main(["estimate", "--db", db_url, "--model", "demo"]) == 0
    out = capsys.readouterr().out
    assert "why: next tokens: host overhead per step: on this engine the GPU and the model size barely change" in out
    assert "priors: from the project's NVIDIA H200 (one GPU) runs of 2026-11-29" in out and "priors_h200.json" in out
    assert "for comparison, transformers, static cache + torch.compile" in out
    assert "TTFT as eager: the compiled recipe's TTFT was not measured" in out
    assert main(["estimate", "--db", db_url, "--model", "demo", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["compared"] and payload["why"][0]["lessons"] and "priors_h200.json" in payload["priors"][0]
