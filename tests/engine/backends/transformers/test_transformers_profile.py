"""The top-operator table of a profile, from torch.profiler's averaged events (no model)."""

from __future__ import annotations

from types import SimpleNamespace

from engine.backends.transformers.profile import OUTSIDE, top_operators


def _event(key: str, cpu_us: float, count: int, device_us: float = 0.0) -> SimpleNamespace:
    return SimpleNamespace(key=key, self_cpu_time_total=cpu_us, self_device_time_total=device_us, count=count)


def test_shares_add_up_and_profiler_steps_are_one_row() -> None:
    events = [
        _event("aten::mm", 600.0, 30),
        _event("ProfilerStep#2", 100.0, 1),
        _event("ProfilerStep#3", 100.0, 1),
        _event("aten::add", 200.0, 60),
        _event("aten::empty", 0.0, 9),
    ]
    top = top_operators(events, on_cuda=False)
    assert [r["name"] for r in top] == ["aten::mm", OUTSIDE, "aten::add"]  # no zero-time rows
    assert top[0] == {"name": "aten::mm", "self_ms": 0.6, "calls": 30, "share_pct": 60.0}
    assert top[1]["self_ms"] == 0.2 and top[1]["calls"] == 0
    assert sum(r["share_pct"] for r in top) == 100.0


def test_on_cuda_kernels_rank_by_device_time() -> None:
    events = [_event("aten::mm", 500.0, 3, device_us=10.0), _event("sm90_xmma_gemm", 0.0, 3, device_us=90.0)]
    top = top_operators(events, on_cuda=True, limit=1)
    assert top == [{"name": "sm90_xmma_gemm", "self_ms": 0.09, "calls": 3, "share_pct": 90.0}]
