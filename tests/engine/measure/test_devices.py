"""Device detection (CPU always; GPUs through NVML, faked here) and device checks."""

from __future__ import annotations

import sys
import types

import pytest

from engine.measure import devices
from engine.measure.devices import Device, check_device, detect_devices, gpu_indices, parse_device_list
from engine.spec import SpecError


def test_cpu_is_always_detected_without_torch():
    found = detect_devices()
    assert found[0].id == "cpu" and found[0].kind == "cpu" and not found[0].busy
    assert found[0].memory_total_bytes and found[0].memory_total_bytes > 0


def test_detection_does_not_import_torch():
    import subprocess

    code = "import sys, engine.measure.devices as d; d.detect_devices(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _fake_nvml(monkeypatch, gpus):
    class Mem:
        def __init__(self, total, used):
            self.total, self.used = total, used

    class Proc:
        def __init__(self, pid, mem):
            self.pid, self.usedGpuMemory = pid, mem

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: gpus[h]["name"].encode(),
        nvmlDeviceGetMemoryInfo=lambda h: Mem(gpus[h]["total"], gpus[h]["used"]),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [Proc(p, 2**30) for p in gpus[h]["procs"]],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)


def test_gpus_by_index_name_memory_and_busy(monkeypatch):
    _fake_nvml(
        monkeypatch,
        [
            {"name": "NVIDIA H200", "total": 141 * 2**30, "used": 0, "procs": []},
            {"name": "NVIDIA H200", "total": 141 * 2**30, "used": 2**30, "procs": [4242]},
        ],
    )
    found = devices.detect_devices()
    assert [d.id for d in found] == ["cpu", "cuda:0", "cuda:1"]
    gpu0, gpu1 = found[1], found[2]
    assert gpu0.name == "NVIDIA H200" and gpu0.index == 0 and not gpu0.busy
    assert gpu1.busy and "1 process" in gpu1.busy_reason
    assert not devices.cuda_devices(ignore_pids={4242})[1].busy
    assert "141 GiB" in gpu0.label


def test_no_driver_means_no_gpus(monkeypatch):
    def boom():
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=boom))
    assert devices.cuda_devices() == []


def _gpu(i, busy=False):
    return Device(
        id=f"cuda:{i}",
        kind="cuda",
        index=i,
        name="G",
        memory_total_bytes=1,
        memory_used_bytes=0,
        busy=busy,
        busy_reason="1 process(es) running" if busy else None,
    )


def test_check_device():
    cpu = detect_devices()[:1]
    check_device("cpu", cpu)
    with pytest.raises(SpecError, match="cuda:3 does not exist"):
        check_device("cuda:3", [*cpu, _gpu(0)])
    check_device("cuda:3", cpu, served={"cuda:3"})  # a worker on another host serves it
    with pytest.raises(SpecError, match="busy"):
        check_device("cuda:0", [*cpu, _gpu(0, busy=True)])
    check_device("cuda:0", [*cpu, _gpu(0, busy=True)], ignore_busy=True)
    check_device("cuda:0,1", [*cpu, _gpu(0), _gpu(1)])


def test_parse_device_list():
    assert parse_device_list("cpu, cuda:0,cuda:1+2") == ["cpu", "cuda:0", "cuda:1,2"]
    assert gpu_indices("cuda:1,2") == [1, 2] and gpu_indices("cpu") == []
    with pytest.raises(SpecError):
        parse_device_list("gpu0")
    with pytest.raises(SpecError):
        parse_device_list(" , ")
