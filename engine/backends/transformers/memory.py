"""Weights memory of a loaded transformers model: the real storage of its tensors."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def storage_bytes(tensors: Iterable[object]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (nested tuples/lists allowed).

    A tensor subclass (torchao's quantized weights, DTensor shards) is opened with
    ``__tensor_flatten__`` and its inner tensors counted (packed int8/int4 data, scales,
    zero points), never its logical float size. Storages shared by several tensors (tied
    embeddings) count once; meta tensors count nothing.
    """
    seen: set[int] = set()
    total = 0
    stack = list(tensors)
    while stack:
        item = stack.pop()
        if isinstance(item, (tuple, list)):
            stack.extend(item)
            continue
        if not isinstance(item, torch.Tensor) or item.is_meta:
            continue
        if hasattr(item, "__tensor_flatten__"):
            names, _context = item.__tensor_flatten__()
            stack.extend(getattr(item, name) for name in names)
            continue
        storage = item.untyped_storage()
        key = storage.data_ptr()
        if key and key in seen:
            continue
        seen.add(key)
        total += storage.nbytes()
    return total


def weights_memory_bytes(*models: nn.Module | None) -> int:
    """Parameters, buffers and packed state (torch's dynamic int8 Linear) of the given models."""
    tensors: list[object] = []
    for model in models:
        if model is None:
            continue
        tensors += [*model.parameters(), *model.buffers(), *model.state_dict(keep_vars=True).values()]
    return storage_bytes(tensors)
