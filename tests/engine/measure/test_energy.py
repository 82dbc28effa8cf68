"""Energy counters: RAPL over a fake /sys/class/powercap tree, and the metrics (None with a reason, never 0)."""

from __future__ import annotations

from pathlib import Path

from engine.measure.energy import EnergyMeter, RaplCounter, energy_metrics, rapl_delta_uj, rapl_zones


def _zone(root: Path, name: str, energy: int, max_range: int = 262143328850) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{energy}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_range}\n")
    (zone / "name").write_text("package-" + name.rsplit(":", 1)[1] + "\n")
    return zone


def test_absent_powercap_says_so(tmp_path):
    zones, why = rapl_zones(tmp_path / "powercap")
    assert zones == [] and "absent" in why and "RAPL not readable" in why


def test_package_zones_only_and_unreadable_ones_said(tmp_path):
    _zone(tmp_path, "intel-rapl:0", 1000)
    _zone(tmp_path, "intel-rapl:0:0", 5)  # a sub-zone (core): counted inside its package already
    (tmp_path / "intel-rapl:1").mkdir()  # no energy_uj (e.g. not readable without root)
    zones, why = rapl_zones(tmp_path)
    assert [z.name for z in zones] == ["package-0"] and why is None
    only_bad = tmp_path / "bad"
    (only_bad / "intel-rapl:0").mkdir(parents=True)
    zones, why = rapl_zones(only_bad)
    assert zones == [] and "intel-rapl:0" in why


def test_wraparound():
    assert rapl_delta_uj(100, 250, 1000) == 150
    assert rapl_delta_uj(900, 50, 1000) == 150


def test_counter_unwraps_across_reads(tmp_path):
    zone = _zone(tmp_path, "intel-rapl:0", 999_000_000, max_range=1_000_000_000)
    counter = RaplCounter(rapl_zones(tmp_path)[0])
    (zone / "energy_uj").write_text("500000\n")  # wrapped: 1 J + 0.5 J
    assert counter.joules() == 1.5
    (zone / "energy_uj").write_text("2500000\n")
    assert counter.joules() == 3.5


def test_cpu_meter_over_fake_rapl(tmp_path):
    zone = _zone(tmp_path, "intel-rapl:0", 10_000_000)
    _zone(tmp_path, "intel-rapl:1", 20_000_000)
    meter = EnergyMeter("cpu", powercap_root=tmp_path)
    meter.start()
    (zone / "energy_uj").write_text("40000000\n")  # package 0 used 30 J
    assert meter.stop() == 30.0
    got = energy_metrics(meter.joules, 10.0, 300, meter.source, meter.unavailable)
    assert got["energy_per_output_token_j"] == 0.1 and got["avg_power_w"] == 3.0
    assert got["energy_source"].startswith("rapl")


def test_unavailable_is_none_with_a_reason_never_zero(tmp_path):
    meter = EnergyMeter("cpu", powercap_root=tmp_path / "none")
    meter.start()
    assert meter.stop() is None
    got = energy_metrics(meter.joules, 10.0, 300, meter.source, meter.unavailable)
    assert got["energy_per_output_token_j"] is None and got["avg_power_w"] is None
    assert "absent" in got["energy_unavailable"]
    gpu = EnergyMeter("cuda:0", gpu_handles=[])
    assert gpu.source is None and "NVML" in gpu.unavailable
