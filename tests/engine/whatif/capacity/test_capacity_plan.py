"""The capacity planner on the serving simulator: a server whose capacity is known is sized to it, a plan picks
the cheapest configuration within the SLO, an SLO nobody meets names the closest one, a trace is sped up to the
probed rate, and configurations that cannot hold the traffic are left out with their reason."""

from __future__ import annotations

import numpy as np
import pytest

from engine.spec import parse_job_spec
from engine.whatif.capacity.configs import prepared, variants_of
from engine.whatif.capacity.planner import plan_capacity
from engine.whatif.capacity.slo import CapacitySLO
from engine.whatif.capacity.table import render_text, rows
from engine.whatif.capacity.traffic import TrafficError, traffic_of
from engine.whatif.hardware import CATALOG, Hardware
from engine.whatif.predict.calibration import Calibrated, GroupFit, calibrated
from engine.whatif.predict.deployment import Terms
from engine.whatif.predict.fitting import ServingBand
from engine.whatif.predict.replay import plan_of
from engine.whatif.serving import StepCosts

MODEL = "synthetic:smollm2-135m"  # random token ids: no tokenizer needed
STEP = StepCosts(step_s=0.01, seq_s=0.0, arrival_s=0.0, eff_bandwidth=1.0, eff_compute=1.0)


def job(engine: str = "transformers", **workload: object):
    wl = {"prompt_tokens": 32, "output_tokens": 10, "warmup_requests": 0, "requests": 300, "arrival": "poisson"}
    wl.update({"rate": 5.0, **workload})
    data = {"model": {"source": MODEL}, "recipe": {"engine": engine}, "workload": wl, "quality": {"metrics": []}}
    return parse_job_spec(data)


def fixed(costs: StepCosts = STEP):
    return lambda terms, hw: Calibrated(costs, None, "test step costs, no band")


def test_a_server_of_known_capacity_is_sized_to_it():
    """One request at a time, 10 steps of ~10 ms each: ~10 requests/s. A TPOT-only SLO holds at any load, so
    only the server falling behind (the saturation verdict) bounds the rate, just under its capacity."""
    ready = prepared(job(), variants_of([]), [CATALOG["h100-sxm"]], [None], fixed(), sample=300)
    [config] = ready.configs
    plan = plan_capacity(ready.configs, ready.traffic, CapacitySLO(tpot_ms=50))
    [capacity] = plan.capacities
    service_s = 1 / capacity.flat_out
    assert 0.1 <= service_s < 0.11  # 10 steps of 10 ms and a tiny roofline
    assert 0.75 * capacity.flat_out <= capacity.main.sustained <= 1.02 * capacity.flat_out
    assert capacity.main.bracket.converged and config.tp == 1
    # a TTFT limit counted from the due time holds only where the queue stays short: a lower rate
    strict = plan_capacity(ready.configs, ready.traffic, CapacitySLO(ttft_ms=150, percentile=90)).capacities[0]
    assert strict.main.sustained < 0.8 * capacity.main.sustained


def test_the_cheapest_within_the_slo_wins_and_the_table_says_predicted_and_uncalibrated():
    hardware = [CATALOG["h100-sxm"], CATALOG["l4"], CATALOG["mi300x"]]
    ready = prepared(job("vllm", rate=40.0), variants_of([]), hardware, [None], fixed(StepCosts()), sample=200)
    plan = plan_capacity(ready.configs, ready.traffic, CapacitySLO(ttft_ms=200, tpot_ms=30), scales=(0.5, 2.0))
    assert plan.met and plan.best() is not None
    priced = [c for c in plan.met if c.main.cost.usd_per_million_tokens is not None]
    assert plan.best() is min(priced, key=lambda c: c.main.cost.usd_per_million_tokens)
    mi300x = next(r for r in rows(plan) if "mi300x" in r["configuration"])
    assert mi300x["$ per 1M out tokens"] == "no price given" and mi300x["replicas for peak"]
    assert [s.scale for s in plan.capacities[0].sized] == [1.0, 0.5, 2.0]
    assert plan.sentence().startswith("Cheapest within TTFT p90 ≤ 200 ms and TPOT p90 ≤ 30 ms: ")
    text = render_text(plan, "synthetic prompts")
    assert "predicted" in text and "price of mi300x: no price given" in text


def test_an_slo_nobody_meets_names_the_closest_configuration():
    ready = prepared(job(), variants_of([]), [CATALOG["h100-sxm"], CATALOG["l4"]], [None], fixed(), sample=100)
    plan = plan_capacity(ready.configs, ready.traffic, CapacitySLO(e2el_ms=20))  # a request alone takes ~100 ms
    assert not plan.met and plan.best() is None
    closest = plan.closest()
    assert closest is not None and closest.main.closest is not None
    sentence = plan.sentence()
    assert sentence.startswith("No configuration meets E2E p90 ≤ 20 ms at any rate; the closest is ")
    assert closest.config.label in sentence and "x the limit" in sentence
    assert plan.to_dict()["closest"] == closest.config.label and plan.to_dict()["best"] is None


def test_configurations_that_cannot_hold_the_traffic_are_left_out_in_one_line():
    spec = job("vllm", prompt_tokens=64)
    big = parse_job_spec({**spec.model_dump(mode="json"), "model": {"source": "synthetic:llama-3-70b"}})
    ready = prepared(big, variants_of([]), [CATALOG["l40s"], CATALOG["h200"]], [1, 2], fixed(), sample=50)
    assert [c.label for c in ready.configs] == ["base · h200 · TP2"]
    reasons = {x.label: x.reason for x in ready.left_out}
    assert "weights of 141.1 GB per device do not fit NVIDIA L40S 48GB" in reasons["base · l40s · TP1"]
    assert all("\n" not in r for r in reasons.values())
    with pytest.raises(TrafficError, match="give the traffic's rate"):
        prepared(job(arrival="batch", rate=None), variants_of([]), [CATALOG["h200"]], [None], fixed())


def test_a_trace_is_sent_on_its_own_schedule_sped_up_to_the_probed_rate():
    plan = plan_of(job(requests=400, rate=2.0))
    for i, p in enumerate(plan.measured):  # a schedule of its own: 1/s, with a burst of 4/s in the middle
        object.__setattr__(p, "due_s", float(i) if i < 100 else (100 + (i - 100) * 0.25 if i < 340 else i - 180.0))
    traffic = traffic_of(plan, "batch", None, sample=100, window_s=30.0)
    assert traffic.arrival == "trace" and traffic.peak_rate == pytest.approx(4.0)
    assert traffic.mean_rate == pytest.approx(400 / 219.0) and traffic.sample_rate == pytest.approx(4.0, rel=0.02)
    requests, client = traffic.at(8.0, 16)
    due = np.array([r.due_s for r in requests])
    assert client.kind == "trace" and due.min() == 0.0 and len(due) == 100
    assert (len(due) - 1) / due.max() == pytest.approx(8.0, rel=0.02)  # twice as fast as its busiest stretch


def test_a_calibrated_configuration_carries_its_label_and_band_into_the_answer():
    band = ServingBand({"ttft_p50": 8.0, "tpot_p50": 3.0, "e2el_p90": 6.0, "throughput": 2.0}, 3)
    cpu = Hardware("local:cpu", "Test CPU (local, measured)", "local", "cpu", 32.0, 20.0, {"fp32": 0.2}, measured=True)
    fit = GroupFit(Terms("transformers", "bf16", "bf16"), cpu, STEP, STEP, [1, 2, 3], band)
    ready = prepared(job(), variants_of([]), [CATALOG["l4"]], [None], lambda t, hw: calibrated(fit, hw), sample=100)
    plan = plan_capacity(ready.configs, ready.traffic, CapacitySLO(tpot_ms=50))
    [row] = rows(plan)
    assert row["calibration"] == "calibrated (carried by roofline), ±8 % TTFT p50, ±3 % TPOT p50, ±6 % E2E p90"
    assert plan.sentence().endswith(f"(predicted; {row['calibration']}).")
    label = plan.to_dict()["configurations"][0]["calibration"]["label"]
    assert "carried to NVIDIA L4 24GB by roofline" in label and "on Test CPU (local, measured)" in label
