"""How the transformers engine hands tokens to a ChunkSink: a stamping streamer for
``model.generate`` and the continuous-batching manager's streamed results.

The streamer receives each step's tokens already copied to the host (``.cpu()`` inside
``generate``), so the stamp marks the moment the token exists for a client, on CUDA as
on the CPU. The first ``put`` is the prompt and is not a chunk.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from engine.backends.base import BackendError, ChunkSink, GenerationParams


class StampingStreamer:
    """A transformers streamer that forwards every step to a ChunkSink."""

    __slots__ = ("_sink", "_prompt_seen", "_finished", "_eos", "_rows")

    def __init__(self, sink: ChunkSink, rows: int, eos_ids: set[int] | None) -> None:
        self._sink = sink
        self._prompt_seen = False
        self._rows = rows
        self._finished = [False] * rows
        self._eos = eos_ids

    def put(self, value: torch.Tensor) -> None:
        t_ns = time.perf_counter_ns()
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        if value.dim() == 1:  # one token per row
            tokens = value.tolist()
            counts = [1] * len(tokens)
        else:  # assisted decoding: several tokens in one step (batch 1)
            tokens = [row[-1] for row in value.tolist()]
            counts = [value.shape[-1]] * value.shape[0]
        sink = self._sink
        for row in range(self._rows):
            if self._finished[row]:
                continue
            sink.chunk(row, t_ns, counts[row])
            if self._eos is not None and tokens[row] in self._eos:
                self._finished[row] = True

    def end(self) -> None:
        return None


def continuous_manager(
    model: Any, prompts: list[list[int]], params: GenerationParams, on_cuda: bool
) -> tuple[Any, dict[str, Any]]:
    """Start transformers' continuous-batching manager sized for this batch; returns it and its sizes.

    Sized on the first (warm-up) batch, which has the measured shapes.
    """
    from transformers import ContinuousBatchingConfig

    page = 64
    longest = max(len(p) for p in prompts) + params.max_new_tokens
    per_request = -(-longest // page)
    config = ContinuousBatchingConfig(
        page_size=page,
        num_blocks=per_request * len(prompts) + len(prompts),
        max_batch_tokens=max(256, min(8192, sum(len(p) for p in prompts))),
        max_requests_per_batch=len(prompts),
        use_cuda_graph=None if on_cuda else False,
        auto_switch_to_flash=on_cuda,
    )
    manager = model.init_continuous_batching(
        generation_config=model.generation_config, continuous_batching_config=config
    )
    manager.start()
    sizes = {"page_size": page, "num_blocks": config.num_blocks, "max_batch_tokens": config.max_batch_tokens}
    return manager, sizes


def stream_continuous(
    manager: Any, prompts: list[list[int]], params: GenerationParams, sink: ChunkSink, call: int
) -> int:
    """Submit one batch to the manager and stamp every streamed result; returns the send stamp."""
    rows = {f"c{call}_{i}": i for i in range(len(prompts))}
    seen = [0] * len(prompts)
    eos = -1 if params.ignore_eos else None
    send_ns = time.perf_counter_ns()
    for rid, row in rows.items():
        manager.add_request(
            prompts[row], request_id=rid, max_new_tokens=params.max_new_tokens, streaming=True, eos_token_id=eos
        )
    pending = set(rows)
    deadline = time.monotonic() + 600.0
    while pending:
        out = manager.get_result(timeout=0.5)
        t_ns = time.perf_counter_ns()
        if out is None:
            if not manager.is_running() or time.monotonic() > deadline:
                raise BackendError("continuous batching stopped before every request finished")
            continue
        row = rows.get(out.request_id)
        if row is None:
            continue
        if out.error:
            raise BackendError(f"continuous batching: {out.error}")
        n = len(out.generated_tokens)
        if n > seen[row]:
            sink.chunk(row, t_ns, n - seen[row])
            seen[row] = n
        if out.is_finished():
            pending.discard(out.request_id)
    return send_ns
