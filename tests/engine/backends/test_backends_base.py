"""What every backend records the same way: the device's real name."""

from __future__ import annotations

from engine.backends import base
from engine.measure.devices import Device
from engine.measure.provenance import cpu_model


def _gpu(index: int, name: str) -> Device:
    return Device(f"cuda:{index}", "cuda", index, name, None, None, False)


def test_cpu_is_named_by_its_model() -> None:
    assert base.device_name("cpu") == cpu_model() != "cpu"


def test_gpus_are_named_by_nvml(monkeypatch) -> None:
    import engine.measure.devices as devices

    monkeypatch.setattr(devices, "cuda_devices", lambda: [_gpu(0, "NVIDIA H200"), _gpu(1, "NVIDIA H200")])
    assert base.device_name("cuda:1") == "NVIDIA H200"
    assert base.device_name("cuda:0,1") == "2 x NVIDIA H200"
    monkeypatch.setattr(devices, "cuda_devices", lambda: [_gpu(0, "NVIDIA H200"), _gpu(1, "NVIDIA L4")])
    assert base.device_name("cuda:0,1") == "NVIDIA H200 + NVIDIA L4"
    assert base.device_name("cuda:7") == "cuda:7"  # NVML does not see it: the id, never a guess
