"""Hardware catalog: required entries with sources, precision fallbacks, local measured devices."""

from __future__ import annotations

import pytest

from engine.whatif.hardware import CATALOG, UnknownHardware, catalog, from_measurement, get_hardware

REQUIRED = (
    "h200",
    "h100-sxm",
    "h100-pcie",
    "a100-80gb",
    "a100-40gb",
    "l40s",
    "l4",
    "a10",
    "rtx-4090",
    "rtx-3090",
    "mi300x",
)


@pytest.mark.parametrize("key", REQUIRED)
def test_required_entries_have_figures_and_a_source(key):
    hw = CATALOG[key]
    assert hw.memory_gb > 0 and hw.bandwidth_gbs > 0
    assert hw.tflops["bf16"] and hw.tflops["fp16"] and hw.tflops["int8"]
    assert hw.interconnect and hw.interconnect_gbs
    assert len(hw.source) > 20 and not hw.measured


def test_data_sheet_figures_spot_checks():
    assert CATALOG["a100-80gb"].bandwidth_gbs == 2039 and CATALOG["a100-40gb"].memory_gb == 40
    assert CATALOG["h100-sxm"].tflops["bf16"] == 989  # dense; the sheet's 1979 is with sparsity
    assert CATALOG["h200"].memory_gb == 141 and CATALOG["h200"].bandwidth_gbs == 4800
    assert CATALOG["mi300x"].memory_gb == 192


def test_precision_fallback_is_reported():
    flops, used = CATALOG["a100-80gb"].peak_flops("fp8")  # Ampere has no FP8 path
    assert used == "bf16" and flops == 312e12
    assert CATALOG["h100-sxm"].peak_flops("fp8") == (1979e12, "fp8")


def test_unknown_hardware_lists_choices():
    with pytest.raises(UnknownHardware, match="choose from: .*a100-80gb"):
        get_hardware("b200")
    with pytest.raises(UnknownHardware, match="python -m engine calibrate"):
        get_hardware("local:cuda:0")
    assert get_hardware(" H100-SXM ").key == "h100-sxm"


def test_local_device_from_a_stored_measurement(db):
    from storage.hardware import NewMeasurement, latest_per_device, save_measurement

    assert "local:cpu" not in catalog(db)
    save_measurement(
        db,
        NewMeasurement(
            host="h",
            device="cpu",
            device_name="Test CPU",
            copy_gbs=10.0,
            matmul_tflops={"fp32": 0.1},
            duration_s=1.0,
            memory_bytes=8_000_000_000,
            threads=2,
        ),
    )
    newest = save_measurement(
        db,
        NewMeasurement(
            host="h",
            device="cpu",
            device_name="Test CPU",
            copy_gbs=12.0,
            matmul_tflops={"fp32": 0.2, "bf16": 0.3},
            duration_s=1.0,
            memory_bytes=8_000_000_000,
            threads=2,
        ),
    )
    entries = catalog(db)
    local = entries["local:cpu"]
    assert local.measured and local.kind == "cpu" and local.bandwidth_gbs == 12.0
    assert local.memory_gb == 8.0 and local.peak_flops("fp32") == (0.2e12, "fp32")
    assert f"measurement {newest}" in local.source
    assert [m.id for m in latest_per_device(db)] == [newest]
    assert from_measurement(latest_per_device(db)[0]).key == "local:cpu"
