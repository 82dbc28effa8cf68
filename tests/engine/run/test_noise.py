"""Noise and validity flags: the pure rules on injected samples, then the real sampler beside a process
burning a core, and a real demo run under that contention."""

from __future__ import annotations

import os
import time

import pytest
from burner import burning_core

from engine.measure.provenance import NoiseSampler, cpu_ticks
from engine.run import noise

QUIET = {"cpu_count": 2, "load_during_max": 0.9, "job_cpu_pct": 100.0, "others_cpu_pct": 3.0, "steal_pct": 0.0}
FINE = {"completed": 40, "duration_s": 12.0}


def flags(samples, metrics=FINE) -> list[str]:
    return [f["flag"] for f in noise.noise_flags(samples, metrics)]


def test_a_quiet_machine_and_a_long_enough_run_have_no_flags():
    assert flags(QUIET) == [] and flags(None) == []


def test_contention_from_other_processes_and_from_the_load():
    busy = {**QUIET, "others_cpu_pct": 95.0, "load_during_max": 3.4}
    busy["busy_processes"] = [{"pid": 7, "name": "python", "cpu_pct": 95.0}]
    [flag] = noise.noise_flags(busy, FINE)
    assert flag == {
        "flag": "contention",
        "kind": "machine",
        "detail": "load 3.4 on 2 cores; other processes used 0.9 cores (python 95 %)",
    }
    assert noise.contended([flag])
    # others out of sight (short-lived), but the load less the job's own share fills both cores
    assert flags({**QUIET, "load_during_max": 3.1, "job_cpu_pct": 100.0}) == ["contention"]
    assert flags({**QUIET, "load_during_max": 2.9, "job_cpu_pct": 100.0}) == []


def test_steal_and_a_shared_gpu():
    got = noise.noise_flags(
        {**QUIET, "steal_pct": 5.12, "gpu_busy": ["cuda:0: 1 process(es) running, 3.0 GiB in use"]}, FINE
    )
    assert [(f["flag"], f["kind"]) for f in got] == [("steal", "machine"), ("gpu_busy", "machine")]
    assert "CPU steal 5.1 %" in got[0]["detail"] and "cuda:0: 1 process(es)" in got[1]["detail"]


def test_too_few_requests_and_too_short():
    got = noise.noise_flags(QUIET, {"completed": 4, "duration_s": 0.4})
    assert [(f["flag"], f["kind"]) for f in got] == [("few_requests", "validity"), ("short", "validity")]
    assert got[0]["detail"] == "4 completed requests: p50 needs 6 for an interval"
    assert not noise.contended(got)


def _trials(*tpots: float) -> dict:
    from engine.run.repeats import drift

    rows = [{"tpot_ms_p50": t} for t in tpots]
    return {**FINE, "trials": rows, "trial_drift": drift(rows)}


def test_a_slow_first_trial_means_the_warm_up_was_too_short():
    assert flags(QUIET, _trials(11.5, 10.0, 10.1, 9.9)) == ["warmup", "drift"]
    assert flags(QUIET, _trials(10.25, 10.0, 10.1, 9.9)) == []  # within noise: 3 % or the others' spread
    assert flags(QUIET, _trials(11.5, 10.0, 12.0)) == ["drift"]  # not slower than every other trial
    assert flags(QUIET, _trials(11.5, 10.0)) == ["drift"]  # two trials cannot tell warm-up from noise
    [warm, _] = noise.noise_flags(QUIET, _trials(12.0, 10.0, 10.0))
    assert warm["detail"] == "trial 1 TPOT p50 20 % slower than the others (their spread 0 %): warm-up too short"


def test_the_sampler_sees_a_process_burning_a_core():
    with burning_core(30) as pid, NoiseSampler("cpu", interval_s=0.2, top=10_000) as sampler:
        time.sleep(3.0)
    samples = sampler.samples
    assert samples["cpu_count"] == os.cpu_count() and samples["measured_s"] >= 3.0
    burner = [p for p in samples["busy_processes"] if p["pid"] == pid]
    # a whole core when it gets one; on a shared machine its share of the cores it competes for
    assert burner and burner[0]["cpu_pct"] > 5, samples["busy_processes"][:5]
    assert "contention" in flags(samples)
    assert cpu_ticks() is None or samples["steal_pct"] is not None


@pytest.mark.slow
@pytest.mark.alone
def test_a_real_run_beside_a_burning_core_is_flagged(demo_folder, db):
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec
    from storage.runs import get_requests, get_run

    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 16, "output_tokens": 8, "requests": 6, "trials": 2, "warmup_requests": 1},
        }
    )
    with burning_core(300):
        result = run_benchmark(spec, db=db, log=lambda _m: None)
    run = get_run(db, result.run_id)
    names = [f["flag"] for f in run.metrics["noise_flags"]]
    assert "contention" in names, run.provenance["noise"]
    assert run.provenance["noise"]["others_cpu_pct"] > 30
    assert [t["trial"] for t in run.metrics["trials"]] == [0, 1] and run.metrics["completed"] == 12
    stored = get_requests(db, result.run_id)
    assert [r.trial for r in stored if not r.warmup] == [0] * 6 + [1] * 6
