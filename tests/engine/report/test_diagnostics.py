"""Diagnostics over hand-made series and requests: throttling, memory growth, attributed P99 spikes, contention."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

from engine.measure.records import RequestRecord
from engine.report.diagnostics import contention, diagnose, throttling
from engine.report.diagnostics_figures import telemetry_figure
from engine.report.diagnostics_memory import memory_growth
from engine.report.diagnostics_spikes import p99_spikes

MS = 1_000_000
T0 = 10**12
RECORDED = json.loads((Path(__file__).parents[1] / "measure" / "data" / "nvml_h200_samples.json").read_text())


def series(fields: dict[str, list], interval_s: float = 0.1, **extra) -> dict:
    n = len(next(iter(fields.values())))
    return {
        "t0_ns": T0,
        "interval_ms": 100,
        "t_s": [round(i * interval_s, 3) for i in range(n)],
        "fields": fields,
        **extra,
    }


def recorded_gpu_series() -> dict:
    """The recorded NVML readings (test_telemetry's fixture) as a telemetry series, in stored units."""
    s = RECORDED["samples"]
    return series(
        {
            "gpu_util_pct": [x["util"] for x in s],
            "gpu_temp_c": [x["temp"] for x in s],
            "gpu_sm_clock_mhz": [x["sm"] for x in s],
            "gpu_power_w": [x["power_mw"] / 1000 for x in s],
            "gpu_throttle_mask": [x["reasons"] for x in s],
            "gpu_other_procs": [0, 0, 0, 1, 1, 0],
        },
        cpu_cores=16,
        gpu_other_processes=[{"pid": 777, "name": "train.py", "used_bytes": 2147483648}],
    )


def test_throttling_from_recorded_nvml_samples():
    (found,) = throttling(recorded_gpu_series())
    assert found.kind == "throttling" and found.severity == "critical"  # hw_thermal_slowdown in sample 5
    assert found.title.startswith("Thermal throttling")
    text = " ".join(found.evidence["details"])
    assert "sw_power_cap" in text and "hw_thermal_slowdown" in text and "89 °C" in text
    assert found.evidence["windows"] == [[0.2, 0.5]]
    assert max(s["gpu_temp_c"] for s in found.evidence["samples"]) == 89
    assert "nvidia-smi" in found.suggestion


def test_no_throttling_on_a_cool_steady_gpu():
    cool = series({"gpu_util_pct": [99] * 5, "gpu_temp_c": [60] * 5, "gpu_sm_clock_mhz": [1980] * 5})
    assert throttling(cool) == [] and throttling(None) == []


def _memory(per_request: float, noise: float = 2e6, plateau_at: int | None = None, n: int = 200) -> dict:
    rng = random.Random(1)
    done = [i // 4 for i in range(n)]
    rss = []
    for d in done:
        served = d if plateau_at is None else min(d, plateau_at)
        rss.append(500e6 + per_request * served + rng.gauss(0, noise))
    return series({"rss_bytes": rss, "requests_done": done})


def test_memory_growth_found_with_its_slope_and_extrapolation():
    (found,) = memory_growth(_memory(per_request=1e6))
    fit = found.evidence["fit"]
    assert found.kind == "memory_growth" and abs(fit["slope_bytes_per_request"] - 1e6) < 5e4
    assert fit["p_value"] < 1e-6 and fit["slope_ci95"][0] < 1e6 < fit["slope_ci95"][1]
    assert "per 24 hours" in found.evidence["details"][0] and "soak" in found.suggestion


def test_no_growth_when_flat_noisy_or_filling_once():
    assert memory_growth(_memory(per_request=0.0, noise=5e6)) == []
    assert memory_growth(_memory(per_request=5e6, plateau_at=5)) == []  # a cache that fills early, then flat
    assert memory_growth(series({"rss_bytes": [1e9] * 3, "requests_done": [0, 1, 2]})) == []


def _sawtooth(teeth: tuple[int, ...], n: int = 400, base: float = 1.1e9, height: float = 4e8) -> dict:
    """RSS that jumps at each long prompt (request ``teeth``) and returns to its base within 5 requests."""
    rng = random.Random(3)
    done = [i // 4 for i in range(n)]
    rss = []
    for d in done:
        peaks = [height * (1 - (d - t) / 5) for t in teeth if t <= d < t + 5]
        rss.append(base + max(peaks, default=0.0) + rng.gauss(0, 3e6))
    return series({"rss_bytes": rss, "requests_done": done})


def test_a_sawtooth_that_returns_to_its_base_is_never_a_leak():
    """Issue 34, item 6: "+5.4 MiB per request ... +78.8 GiB per 24 hours" with r² = 0.21 on a sawtooth that
    returned to 1.1 GB after each long prompt. Peaks bunched late make the least-squares slope positive and
    "significant" (r² 0.24 and 0.41 here; the old rule flagged both): the floor does not rise."""
    for teeth in ((40, 60, 75, 85, 92, 97), (50, 70, 80, 86, 90, 94, 97), (90, 93, 96, 98)):
        assert memory_growth(_sawtooth(teeth)) == []


def test_a_real_linear_leak_is_still_flagged_with_the_rule_in_words():
    leak = _memory(per_request=2e6, n=400)  # 2 MB per request over 100 requests, 2 MB noise
    (found,) = memory_growth(leak)
    fit = found.evidence["fit"]
    assert fit["r_squared"] > 0.9 and fit["floor_rise_bytes"] > 100e6 and fit["slope_ci95"][0] > 0
    assert "rule: flagged only when the slope's 95 % interval" in found.evidence["details"][-1]
    # the same leak under a sawtooth of long prompts: the floor still rises, so it is still a leak (a leak smaller
    # than the sawtooth's own swing explains too little of the series, r² < 0.5, and waits for a longer soak)
    teeth = _sawtooth((20, 45, 70), height=1.5e8)
    teeth["fields"]["rss_bytes"] = [
        v + 2e6 * d for v, d in zip(teeth["fields"]["rss_bytes"], leak["fields"]["requests_done"], strict=True)
    ]
    (found,) = memory_growth(teeth)
    assert found.kind == "memory_growth"


def test_a_short_run_is_too_short_to_call_a_leak():
    short = _memory(per_request=1e6, n=24)  # 2.4 s of samples
    assert memory_growth(short) == []


def _request(i: int, send_ms: float, e2el_ms: float, prompt: int = 128, queue_ms: float = 0.0) -> RequestRecord:
    send = T0 + int(send_ms * MS)
    chunks = [send + int(e2el_ms * MS * k / 8) for k in range(1, 9)]
    return RequestRecord(i, send - int(queue_ms * MS), send, prompt, chunks, [1] * 8)


def _spiky_run() -> list[RequestRecord]:
    reqs = [_request(i, i * 100, 100) for i in range(30)]
    reqs += [_request(30, 3000, 600, prompt=2048), _request(31, 3010, 650, prompt=2048)]  # long prompts together
    reqs.append(_request(32, 5000, 500, queue_ms=400))
    return reqs


def test_p99_spikes_attributed_to_what_coincided():
    hot = [0] * 60
    hot[31:36] = [4] * 5  # sw_power_cap from 3.1 to 3.5 s
    tele = series({"gpu_throttle_mask": hot, "rss_bytes": [1e9] * 60, "requests_done": list(range(60))})
    server = series({"num_preemptions_total": [0] * 31 + [3] * 29, "kv_cache_usage_perc": [0.5] * 30 + [0.99] * 30})
    (found,) = p99_spikes(_spiky_run(), tele, server)
    rows = {r["index"]: r for r in found.evidence["requests"]}
    assert set(rows) == {30, 31, 32}
    assert {"long prompts", "throttling", "preemptions", "KV-cache saturation"} <= set(rows[30]["coincided"])
    assert "client queueing" in rows[32]["coincided"] and rows[32]["queue_ms"] == 400.0
    assert rows[30]["window_s"] == [3.0, 3.6]
    assert found.severity == "warning" and "6.5x the median" in found.title


def test_p99_spikes_without_telemetry_or_server_metrics():
    (found,) = p99_spikes(_spiky_run())
    assert all("throttling" not in r["coincided"] for r in found.evidence["requests"])
    steady = [_request(i, i * 100, 100) for i in range(40)]
    assert p99_spikes(steady) == [] and p99_spikes(steady[:5]) == []


def test_contention_from_noise_flags_and_telemetry_windows():
    flags = [{"flag": "contention", "kind": "machine", "detail": "other processes used 1.0 cores (burn 99 %)"}]
    tele = series({"steal_pct": [0, 0, 6, 7, 0], "load_1m": [1.0] * 5, "gpu_other_procs": [0] * 5}, cpu_cores=2)
    (found,) = contention(tele, flags, {"busy_processes": [{"pid": 9, "name": "burn", "cpu_pct": 99.0}]})
    text = " ".join(found.evidence["details"])
    assert "burn 99 %" in text and "steal up to 7 %" in text and found.evidence["windows"] == [[0.2, 0.3]]
    assert found.evidence["processes"][0]["pid"] == 9
    (gpu,) = contention(recorded_gpu_series(), [], None)
    assert "train.py (pid 777)" in " ".join(gpu.evidence["details"])
    assert contention(series({"load_1m": [0.5] * 3}, cpu_cores=2), [{"kind": "validity"}]) == []


def test_diagnose_orders_by_severity_and_the_figure_draws_it():
    run = SimpleNamespace(metrics={"noise_flags": []}, provenance={})
    tele = recorded_gpu_series()
    findings = diagnose(run, [], tele, None)
    assert [f.kind for f in findings] == ["throttling", "contention"]
    assert findings[0].to_dict()["severity"] == "critical"
    fig = telemetry_figure(tele, _spiky_run(), findings).to_plotly_json()
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles[:3] == ["utilisation [%]", "temperature [°C]", "clocks [MHz]"] and titles[-1] == "requests in flight"
    assert fig["layout"]["shapes"]  # the findings' windows, shaded
    assert diagnose(SimpleNamespace(metrics=None, provenance=None), None, None) == []
