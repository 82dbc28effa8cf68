"""vLLM's backends without starting vLLM: counters of the measured phase only, real device names."""

from __future__ import annotations

from typing import Any

from engine.backends.vllm import inprocess, server

WARMUP = {
    "vllm:spec_decode_num_drafts": 10.0,
    "vllm:spec_decode_num_draft_tokens": 30.0,
    "vllm:spec_decode_num_accepted_tokens": 20.0,
}
AFTER = {
    "vllm:spec_decode_num_drafts": 25.0,
    "vllm:spec_decode_num_draft_tokens": 75.0,
    "vllm:spec_decode_num_accepted_tokens": 35.0,
}


def test_spec_stats_subtract_the_snapshot_taken_when_measuring_starts() -> None:
    stats = inprocess.spec_stats_from(AFTER, WARMUP)
    assert stats == {
        "draft_tokens": 45,
        "accepted_tokens": 15,
        "acceptance_rate": 15 / 45,
        "mean_acceptance_length": 1 + 15 / 15,
    }
    assert inprocess.spec_stats_from(WARMUP, WARMUP) is None  # nothing drafted while measuring


def test_in_process_backend_counts_the_measured_phase_only(monkeypatch) -> None:
    readings = iter([WARMUP, AFTER])
    monkeypatch.setattr(inprocess, "_spec_counters", lambda: next(readings))
    backend = inprocess.VllmBackend()
    backend.measuring_started()
    assert backend._spec_baseline == WARMUP
    spec = inprocess.spec_stats_from(inprocess._spec_counters(), backend._spec_baseline)
    assert spec is not None and spec["draft_tokens"] == 45 and spec["accepted_tokens"] == 15


class _FakeServer:
    def __init__(self, texts: list[str]) -> None:
        self._texts = iter(texts)
        self.args = ["python", "-m", "vllm", "--model", "x"]

    def metrics_text(self) -> str:
        return next(self._texts)

    def stop(self) -> None:
        return None


def _prometheus(values: dict[str, float]) -> str:
    return "\n".join(f'{k}_total{{model_name="x"}} {v}' for k, v in values.items())


def test_managed_server_counts_the_measured_phase_only(monkeypatch) -> None:
    backend = server.VllmServerBackend()
    backend._server = _FakeServer([_prometheus(WARMUP), _prometheus(AFTER)])  # type: ignore[assignment]
    backend._device, backend._device_name = "cpu", "Test CPU"
    monkeypatch.setattr(server.OpenAIBackend, "info", lambda self: {"engine": "openai"})
    backend.measuring_started()
    info: dict[str, Any] = backend.info()
    assert info["spec_decode"]["draft_tokens"] == 45 and info["spec_decode"]["accepted_tokens"] == 15
    assert info["device_name"] == "Test CPU" and info["device"] == "cpu"
