"""How the transformers engine hands tokens to the records: a stamping streamer for
``model.generate`` and the continuous-batching manager's streamed results, both calling
``chunk(row, t_ns, n_tokens)`` (:func:`engine.backends.base.stamp_chunks`).

The streamer receives each step's tokens already copied to the host (``.cpu()`` inside
``generate``), so the stamp marks the moment the token exists for a client, on CUDA as
on the CPU. The first ``put`` is the prompt and is not a chunk.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

import torch
from torch import nn

from engine.backends.base import BackendError
from engine.jsonvalue import JSONObject

Chunk = Callable[[int, int, int], None]  # (row, t_ns, n_tokens)


class StampingStreamer:
    """A transformers streamer that forwards every step of every unfinished row to ``chunk``.

    ``limits`` (one per row) ends a row after its own number of new tokens: a static batch
    generates to its longest request, and each shorter request is done when its last token
    arrives. ``keep_ids`` keeps every row's new token ids (:attr:`ids`) for replies wanted back.
    """

    __slots__ = ("_chunk", "_prompt_seen", "_finished", "_eos", "_rows", "_left", "ids")

    def __init__(
        self,
        chunk: Chunk,
        rows: int,
        eos_ids: set[int] | None,
        limits: Sequence[int] | None = None,
        keep_ids: bool = False,
    ) -> None:
        self._chunk = chunk
        self._prompt_seen = False
        self._rows = rows
        self._finished = [False] * rows
        self._eos = eos_ids
        self._left = list(limits) if limits is not None else None
        self.ids: list[list[int]] | None = [[] for _ in range(rows)] if keep_ids else None

    def put(self, value: torch.Tensor) -> None:
        t_ns = time.perf_counter_ns()
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        steps = [[t] for t in value.tolist()] if value.dim() == 1 else value.tolist()  # assisted: several a step
        for row in range(self._rows):
            if self._finished[row]:
                continue
            new = steps[row]
            if self._left is not None:
                new = new[: self._left[row]]
                self._left[row] -= len(new)
                self._finished[row] = self._left[row] <= 0
            if self._eos is not None and any(t in self._eos for t in new):
                new = new[: next(i for i, t in enumerate(new) if t in self._eos) + 1]
                self._finished[row] = True
            if new:
                self._chunk(row, t_ns, len(new))
                if self.ids is not None:
                    self.ids[row].extend(new)

    def end(self) -> None:
        return None


class _Result(Protocol):
    """One streamed result of the continuous-batching manager (transformers' ``GenerationOutput``)."""

    request_id: str
    error: str | None
    generated_tokens: list[int]

    def is_finished(self) -> bool: ...


class ContinuousManager(Protocol):
    """What is asked of transformers' continuous-batching manager (``model.init_continuous_batching()``)."""

    def start(self) -> None: ...

    def stop(self, block: bool = ..., timeout: float | None = ...) -> None: ...

    def add_request(
        self, input_ids: list[int], request_id: str, max_new_tokens: int, streaming: bool, eos_token_id: int | None
    ) -> str: ...

    def get_result(self, timeout: float | None = ...) -> _Result | None: ...

    def is_running(self) -> bool: ...


def continuous_manager(
    model: nn.Module, prompts: list[list[int]], max_new_tokens: int, on_cuda: bool
) -> tuple[ContinuousManager, JSONObject]:
    """Start transformers' continuous-batching manager sized for this batch; returns it and its sizes.

    Sized on the first (warm-up) batch, which has the measured shapes.
    """
    from transformers import ContinuousBatchingConfig

    page = 64
    longest = max(len(p) for p in prompts) + max_new_tokens
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
    manager: ContinuousManager,
    prompts: list[list[int]],
    max_new_tokens: Sequence[int],
    ignore_eos: bool,
    chunk: Chunk,
    call: int,
    texts: list[list[int]] | None = None,
) -> int:
    """Submit one batch to the manager and stamp every streamed result; returns the send stamp.

    ``texts`` (one list per row), when given, receives every row's generated token ids."""
    rows = {f"c{call}_{i}": i for i in range(len(prompts))}
    seen = [0] * len(prompts)
    eos = -1 if ignore_eos else None
    send_ns = time.perf_counter_ns()
    for rid, row in rows.items():
        manager.add_request(
            prompts[row], request_id=rid, max_new_tokens=max_new_tokens[row], streaming=True, eos_token_id=eos
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
            chunk(row, t_ns, n - seen[row])
            if texts is not None:
                texts[row].extend(out.generated_tokens[seen[row] : n])
            seen[row] = n
        if out.is_finished():
            pending.discard(out.request_id)
    return send_ns
