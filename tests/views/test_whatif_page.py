"""What-if page (AppTest): renders from the URL, writes its state back, overlays measured
runs, and turns bad parameters into friendly messages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "app.py"
sys.path.append(str(Path(__file__).resolve().parents[1] / "engine" / "whatif"))
from whatif_seed import save_cpu_measurement, seed_mixed  # noqa: E402  (the what-if tests' seeding)


@pytest.fixture
def app_db(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    return db


def open_whatif(**params: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=30)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page("views/whatif.py")
    return at.run()


def test_renders_table_and_chart_from_the_url(app_db):
    at = open_whatif(
        model="synthetic:llama-3-8b", dtype="bf16", bs="2", prompt="256", output="64", hw="a100-80gb,rtx-4090,l4"
    )
    assert not at.exception and not at.warning
    frame = at.dataframe[0].value
    assert list(frame["hardware"]) == ["a100-80gb", "rtx-4090", "l4"]
    assert frame["weights [GB]"].tolist() == ["16.06", "16.06", "16.06"]
    assert frame["fits?"].tolist() == ["fits", "fits", "fits"]
    assert all(w.startswith("first token ") for w in frame["what bounds it"])
    assert frame["calibration"].tolist() == ["data-sheet figures only, not calibrated"] * 3
    assert not frame.isin(["None", "nan"]).any().any()  # empty cells are blank
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = {t.get("name") for t in fig["data"]}
    assert {"predicted", "weights", "kv", "usable capacity"} <= names
    for axis in ("yaxis", "yaxis2"):  # latency bars start at zero on a linear axis (a log axis exaggerated gaps)
        assert fig["layout"][axis].get("type", "linear") != "log"
        assert fig["layout"][axis].get("rangemode") == "tozero"
    assert any("uncalibrated" in i.value for i in at.info)
    link = "\n".join(m.value for m in at.markdown)
    assert "launch?model=synthetic%3Allama-3-8b" in link and "batch_size=2" in link and "dtype=bfloat16" in link


def test_query_params_round_trip(app_db):
    params = {
        "model": "synthetic:qwen2.5-7b",
        "engine": "vllm",
        "dtype": "fp8",
        "kv": "fp8",
        "bs": "8",
        "tp": "2",
        "prompt": "1024",
        "output": "128",
        "conc": "16",
        "hw": "h100-sxm,mi300x",
    }
    at = open_whatif(**params)
    assert not at.exception and not at.warning
    assert {k: at.query_params[k] for k in params} == params
    at.number_input(key="wi_bs").set_value(4).run()
    assert at.query_params["bs"] == "4" and at.query_params["hw"] == "h100-sxm,mi300x"


@pytest.mark.parametrize(
    "params, needle",
    [
        ({"bs": "abc"}, "'abc' is not a valid bs"),
        ({"hw": "b200,l4"}, "unknown hardware b200"),
        ({"dtype": "int3"}, "unknown precision 'int3'"),
        ({"engine": "tensorrt"}, "unknown engine 'tensorrt'"),
    ],
)
def test_bad_params_give_a_friendly_message(app_db, params, needle):
    at = open_whatif(**params)
    assert not at.exception
    assert any(needle in w.value for w in at.warning)
    assert at.dataframe  # still renders with the defaults


def test_unknown_model_folder_is_a_warning(app_db):
    at = open_whatif(model="/no/such/folder")
    assert not at.exception
    assert any("Cannot estimate this" in w.value for w in at.warning)


def test_measured_runs_overlay_on_the_local_device(app_db):
    from storage.runs import NewRun, save_run

    save_cpu_measurement(app_db, host="h", memory_bytes=16_000_000_000)
    for i, (ttft, tpot) in enumerate([(100.0, 40.0), (300.0, 45.0)]):
        prompt = 64 * (i + 1)
        save_run(
            app_db,
            NewRun(
                status="done",
                fingerprint=f"f{i}",
                model="demo",
                engine="transformers",
                device="cpu",
                spec={
                    "model": {"source": "demo"},
                    "recipe": {"engine": "transformers", "dtype": "auto"},
                    "workload": {"prompt_tokens": prompt, "output_tokens": 16, "batch_size": 1},
                },
                provenance={"host": "h", "applied": {"dtype": "float32"}},
                metrics={"ttft_ms": {"p50": ttft}, "tpot_ms": {"p50": tpot}},
            ),
        )
    at = open_whatif(model="demo", prompt="64", output="16", hw="local:cpu,l4")
    assert not at.exception and not at.warning
    frame = at.dataframe[0].value.set_index("hardware")
    assert frame.loc["local:cpu", "measured TPOT [ms]"] == "40.00"
    assert frame.loc["local:cpu", "TPOT error"].startswith("±")
    assert frame.loc["local:cpu", "calibration"].startswith("calibrated from 2 runs on this CPU, ±")
    assert frame.loc["l4", "measured TPOT [ms]"] == "" and frame.loc["l4", "measured runs"] == ""
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert any(t.get("name") == "measured" for t in fig["data"])


@pytest.mark.slow
def test_calibration_button_measures_the_cpu(app_db):
    at = open_whatif(model="demo", hw="l4")
    at.button[0].click().run(timeout=120)
    assert not at.exception and any("stored as measurement" in s.value for s in at.success)
    at = open_whatif(model="demo", hw="local:cpu")
    assert not at.warning and at.dataframe[0].value["hardware"].tolist() == ["local:cpu"]


def test_runs_the_estimator_does_not_model_are_left_out_and_not_overlaid(app_db):
    ids = seed_mixed(app_db)
    at = open_whatif(model="demo", prompt="32", output="16", hw="local:cpu")
    assert not at.exception and not at.warning
    labels = [e.label for e in at.expander]
    assert (
        "4 runs left out: 2 Poisson load (not modelled), 1 speculative decoding (not modelled), "
        "1 torch.compile (not modelled)"
    ) in labels
    row = at.dataframe[0].value.set_index("hardware").loc["local:cpu"]
    plain = ids["plain"][0]  # the batch-1, 32-token plain run
    assert float(row["measured TPOT [ms]"]) == pytest.approx(_plain_tpot(app_db, plain), abs=0.005)
    assert any("calibrated on 24 transformers/fp32" in c.value for c in at.caption)
    at = open_whatif(model="demo", prompt="32", output="16", hw="local:cpu", drop="6")
    row = at.dataframe[0].value.set_index("hardware").loc["local:cpu"]
    assert float(row["measured TPOT [ms]"]) == pytest.approx(_plain_tpot(app_db, ids["dropped"][0]), abs=0.005)
    assert at.query_params["drop"] == "6"


def _plain_tpot(db, run_id: int) -> float:
    from storage.runs import get_run

    return get_run(db, run_id).metrics["tpot_ms"]["p50"]


def test_an_entry_that_does_not_fit_shows_why_instead_of_timings(app_db):
    """A 70B model on one A100 and on an L4: the no-fit text with what would fit, no TTFT or TPOT number."""
    at = open_whatif(model="synthetic:llama-3-70b", dtype="bf16", hw="a100-80gb,l4,mi300x")
    assert not at.exception
    assert [w.value.split(":")[0] for w in at.warning] == [
        "**a100-80gb** (NVIDIA A100 SXM 80GB)",
        "**l4** (NVIDIA L4 24GB)",
    ]
    assert "try tensor parallel 2 or int8" in at.warning[0].value
    frame = at.dataframe[0].value.set_index("hardware")
    assert frame.loc["a100-80gb", "fits?"] == "does not fit: needs 142 GB, 76 GB usable — try tensor parallel 2 or int8"
    assert frame.loc["l4", "fits?"].startswith("does not fit: needs 142 GB, 23 GB usable — try tensor parallel 8")
    for hw in ("a100-80gb", "l4"):
        assert frame.loc[hw, "TTFT [ms]"] == frame.loc[hw, "TPOT [ms]"] == frame.loc[hw, "output tokens/s"] == ""
        assert "does not fit" not in frame.loc[hw, "notes"]  # said once, in its own column
    assert frame.loc["mi300x", "fits?"] == "fits" and float(frame.loc["mi300x", "TTFT [ms]"]) > 0
    assert not frame.isin(["None", "nan"]).any().any()
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    predicted = [t for t in fig["data"] if t.get("name") == "predicted"][0]
    assert predicted["y"][:2] == [None, None]
    labels = [t for t in fig["data"] if t.get("mode") == "text"]
    assert labels and labels[0]["x"] == ["a100-80gb", "l4"] and labels[0]["text"][0] == "does not fit"
    text = "\n".join(m.value for m in at.markdown)
    assert "- a100-80gb: data-sheet figures only, not calibrated" in text
