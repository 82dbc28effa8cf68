"""Diagnostics on the Run page and in Compare (AppTest): findings with evidence, energy per token, telemetry charts."""

from __future__ import annotations

import json

import pytest
from seed_runs import make_run, open_page

HOT = {
    "t0_ns": 0,
    "interval_ms": 100,
    "t_s": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5],
    "fields": {
        "gpu_util_pct": [0, 97, 99, 99, 99, 98],
        "gpu_temp_c": [41, 72, 84, 88, 89, 86],
        "gpu_sm_clock_mhz": [1980, 1980, 1755, 1410, 1395, 1500],
        "gpu_throttle_mask": [1, 0, 4, 36, 96, 32],
        "rss_bytes": [1e9] * 6,
        "requests_done": [0, 1, 2, 3, 4, 5],
    },
    "units": {},
    "source": "nvml+psutil",
    "unavailable": {"cpu_temp_c": "no temperature sensors exposed"},
    "cpu_cores": 16,
}
ENERGY = {"energy_per_output_token_j": 0.42, "avg_power_w": 610.0, "energy_source": "nvml: GPU board energy"}


@pytest.fixture
def runs(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    hot = make_run(db, name="hot", series={"telemetry": HOT}, extra_metrics=ENERGY)
    old = make_run(
        db, name="old", extra_metrics={"energy_unavailable": "RAPL not readable: /sys/class/powercap absent"}
    )
    return hot, old


def _text(at) -> str:
    parts = [m.value for m in at.markdown] + [w.value for w in at.warning] + [e.value for e in at.error]
    text = "\n".join(str(p) for p in parts + [i.value for i in at.info] + [c.value for c in at.caption])
    return text.replace("\\", "")  # markdown escapes (0\\.42) read as shown


def test_run_page_shows_findings_energy_and_telemetry(runs):
    at = open_page("views/run.py", run=str(runs[0]))
    assert not at.exception
    assert "Diagnostics" in [s.value for s in at.subheader]
    assert any("Thermal throttling" in e.value for e in at.error)  # hw_thermal_slowdown: critical
    text = _text(at)
    assert "0.42 J/token" in text and "610 W" in text and "89 °C" in text and "nvidia-smi" in text
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert "Device telemetry during the measured phase" in titles
    assert "no temperature sensors exposed" in text


def test_old_run_says_energy_unavailable_and_no_telemetry(runs):
    at = open_page("views/run.py", run=str(runs[1]))
    assert not at.exception
    text = _text(at)
    assert "unavailable: RAPL not readable: /sys/class/powercap absent" in text
    assert "No device telemetry for this run" in text


def test_compare_shows_findings_side_by_side(runs):
    at = open_page("views/compare.py", runs=f"{runs[0]},{runs[1]}", baseline=str(runs[0]))
    assert not at.exception
    assert "Diagnostics" in [s.value for s in at.subheader]
    text = _text(at)
    assert "Thermal throttling" in text and "unavailable: RAPL" in text
    assert "energy per output token" in " ".join(str(v) for v in at.dataframe[0].value["metric"])


def _memory_series(leak_per_request: float, teeth: tuple[int, ...] = ()) -> dict:
    """RSS over 100 requests (400 samples, 40 s): a base of 1.1 GB, peaks of 400 MB at ``teeth`` that return to
    the base within 5 requests, plus ``leak_per_request`` bytes each request keeps."""
    done = [i // 4 for i in range(400)]
    rss = [
        1.1e9 + leak_per_request * d + max((4e8 * (1 - (d - t) / 5) for t in teeth if t <= d < t + 5), default=0.0)
        for d in done
    ]
    return {"t0_ns": 0, "interval_ms": 100, "t_s": [i / 10 for i in range(400)],
            "fields": {"rss_bytes": rss, "requests_done": done}, "units": {}, "source": "psutil", "cpu_cores": 2}  # fmt: skip


def test_compare_calls_a_sawtooth_no_leak_and_a_leak_a_leak(db, db_url, monkeypatch):
    """Issue 34, item 6: a false red "Memory growth" on a sawtooth, repeated on Compare."""
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    saw = make_run(db, name="saw", series={"telemetry": _memory_series(0.0, (40, 60, 75, 85, 92, 97))})
    leak = make_run(db, name="leak", series={"telemetry": _memory_series(3e6)}, seed=1)
    at = open_page("views/compare.py", runs=f"{saw},{leak}", baseline=str(saw))
    assert not at.exception
    text = _text(at)
    assert text.count("Memory growth") == 1 and "+2.9 MiB per request" in text
    at = open_page("views/run.py", run=str(saw))
    assert not at.exception and "Memory growth" not in _text(at)
