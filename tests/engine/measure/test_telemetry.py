"""Device telemetry: the CPU sampler with psutil, NVML code over recorded readings, and the real NVML path (gpu)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.measure import gpu_telemetry, telemetry
from engine.measure.gpu_telemetry import NvmlReader, throttle_names
from engine.measure.telemetry import TelemetrySampler, sample_devices

RECORDED = json.loads((Path(__file__).parent / "data" / "nvml_h200_samples.json").read_text())


class FakeNvml:
    """Replays recorded NVML answers, one sample per read (the utilisation query starts each sample)."""

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2

    def __init__(self, samples=None, refuse: tuple[str, ...] = ()) -> None:
        self.samples, self.i, self.refuse, self.calls = samples or RECORDED["samples"], -1, refuse, {}

    def _s(self, what: str):
        self.calls[what] = self.calls.get(what, 0) + 1
        if what in self.refuse:
            raise RuntimeError("Not Supported")
        return self.samples[min(max(self.i, 0), len(self.samples) - 1)]

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"gpu{i}"

    def nvmlDeviceGetName(self, h):
        return RECORDED["name"].encode()

    def nvmlDeviceGetUtilizationRates(self, h):
        self.i += 1
        return SimpleNamespace(gpu=self._s("util")["util"])

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=self._s("mem")["mem_used"])

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._s("temp")["temp"]

    def nvmlDeviceGetClockInfo(self, h, clock):
        return self._s("clock")["sm" if clock == self.NVML_CLOCK_SM else "memclk"]

    def nvmlDeviceGetPowerUsage(self, h):
        return self._s("power")["power_mw"]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return self._s("energy")["energy_mj"]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._s("reasons")["reasons"]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._s("procs")["procs"]]


def test_throttle_reason_names():
    assert throttle_names(0) == [] and throttle_names(None) == []
    assert throttle_names(36) == ["sw_power_cap", "sw_thermal_slowdown"]
    assert throttle_names(0x1000 | 0x40) == ["hw_thermal_slowdown", "0x1000"]


def test_nvml_reader_over_recorded_samples():
    reader = NvmlReader([0], own_pids=lambda: {4242}, nvml=FakeNvml())
    assert reader.open() is None and reader.names == ["NVIDIA H200"]
    rows = [reader.read() for _ in RECORDED["samples"]]
    assert [r["gpu_temp_c"] for r in rows] == [41, 72, 84, 88, 89, 86]
    assert rows[1]["gpu_power_w"] == 612.0 and rows[1]["gpu_energy_j"] == pytest.approx(61.2)
    assert rows[0]["gpu_energy_j"] == 0.0  # the counter counts from the first sample
    assert [r["gpu_other_procs"] for r in rows] == [0, 0, 0, 1, 1, 0]  # our own pid 4242 is not "other"
    assert reader.other_processes[777]["used_bytes"] == 2147483648
    assert throttle_names(rows[4]["gpu_throttle_mask"]) == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert reader.unavailable == {}


def test_a_refused_query_is_unavailable_with_nvmls_answer_and_asked_once():
    fake = FakeNvml(refuse=("power",))
    reader = NvmlReader([0], own_pids=set, nvml=fake)
    reader.open()
    rows = [reader.read() for _ in range(3)]
    assert all(r["gpu_power_w"] is None for r in rows) and rows[2]["gpu_temp_c"] == 84
    assert reader.unavailable == {"gpu_power_w": "NVML: Not Supported"}
    assert fake.calls["power"] == 1


def test_no_driver_makes_every_gpu_field_unavailable():
    class NoDriver:
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    reader = NvmlReader([0], own_pids=set, nvml=NoDriver())
    assert "Not Found" in reader.open()
    assert set(reader.unavailable) == set(gpu_telemetry.GPU_UNITS)
    assert all(v is None for v in reader.read().values())


def test_gpu_sampler_series_and_energy_over_recorded_samples():
    sampler = TelemetrySampler("cuda:0", interval=10, nvml=FakeNvml())
    with sampler:
        time.sleep(0.1)
    series = sampler.series()
    assert series["source"] == "nvml+psutil" and series["gpu_names"] == ["NVIDIA H200"]
    fields = series["fields"]
    assert len(fields["gpu_temp_c"]) == len(series["t_s"]) >= 3
    assert fields["gpu_temp_c"][:3] == [41, 72, 84]
    assert {p["pid"] for p in series["gpu_other_processes"]} == {777, 4242}  # neither is in our process tree
    energy = sampler.energy_metrics(output_tokens=100)
    # the meter reads the same counter: at least the first two recorded samples' 61.2 J apart
    assert energy["energy_source"].startswith("nvml") and energy["energy_per_output_token_j"] > 0
    assert energy["avg_power_w"] == pytest.approx(energy["energy_j"] / sampler.seconds)


def test_cpu_sampler_series_shape_and_requests_done():
    done = [0]
    sampler = TelemetrySampler("cpu", interval=20, requests_done=lambda: done[0])
    with sampler:
        for _ in range(5):
            time.sleep(0.03)
            done[0] += 1
    series = sampler.series()
    assert series["interval_ms"] == 20 and series["source"] == "psutil" and series["cpu_cores"] >= 1
    assert series["t_s"] == sorted(series["t_s"]) and series["t0_ns"] > 0
    fields = series["fields"]
    n = len(series["t_s"])
    assert all(len(col) == n for col in fields.values())
    assert min(fields["rss_bytes"]) > 10 * 2**20
    assert fields["requests_done"][0] == 0 and fields["requests_done"][-1] == 5
    for name in ("cpu_util_mean_pct", "cpu_util_max_pct", "load_1m"):
        assert name in fields and series["units"][name] == telemetry.CPU_UNITS[name]
    for name in telemetry.CPU_UNITS:  # every field is either in the series or unavailable with a reason
        assert (name in fields) != (name in series["unavailable"])
    assert len(json.dumps(series)) / n < 200  # compact: a 10-minute run at 100 ms stays well under 1 MB


def test_interval_above_100_ms_is_refused():
    with pytest.raises(ValueError, match="100 ms"):
        TelemetrySampler("cpu", interval=250)


def test_interval_setting(monkeypatch):
    from engine.settings import get_settings

    monkeypatch.setenv("LATENCYLAB_TELEMETRY_INTERVAL_MS", "50")
    get_settings.cache_clear()
    try:
        assert TelemetrySampler("cpu").interval_ms == 50
    finally:
        monkeypatch.delenv("LATENCYLAB_TELEMETRY_INTERVAL_MS")
        get_settings.cache_clear()


def test_long_phases_are_thinned(monkeypatch):
    monkeypatch.setattr(telemetry, "MAX_SAMPLES", 6)
    sampler = TelemetrySampler("cpu", interval=10)
    with sampler:
        time.sleep(0.3)
    assert len(sampler.series()["t_s"]) <= 7
    assert sampler._interval_s > 0.01  # sampling slowed down as it thinned


def test_sample_devices_one_reading_with_the_series_names():
    row = sample_devices("cpu")
    assert row["rss_bytes"] > 0 and set(row) <= set(telemetry.CPU_UNITS)
    assert all(isinstance(v, float) for v in row.values())


@pytest.mark.gpu
def test_real_nvml_sampler_on_gpu0():
    sampler = TelemetrySampler("cuda:0", interval=50)
    with sampler:
        time.sleep(0.5)
    series = sampler.series()
    assert series["source"] == "nvml+psutil"
    for name in ("gpu_util_pct", "gpu_mem_used_bytes", "gpu_temp_c", "gpu_sm_clock_mhz", "gpu_power_w"):
        assert name in series["fields"], series["unavailable"]
    assert sampler.energy_metrics(1)["energy_j"] is not None
    assert "gpu_temp_c" in sample_devices("cuda:0")


@pytest.mark.parametrize("rss", [True, False])
def test_phase_samplers_sample_rss_only_for_the_jobs_own_tree(rss: bool) -> None:
    """A remote server's memory is not the job's tree: its phase has no RSS sampler taking the client's CPU."""
    with telemetry.phase_samplers("cpu", lambda: 0, rss=rss) as (tree, _machine, _tele):
        time.sleep(0.05)
    assert (tree.samples > 0) is rss and (tree.peak_bytes > 0) is rss
