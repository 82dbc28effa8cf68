"""Memory per device of a recipe: weights, KV cache, activations, runtime; largest fit."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from engine.whatif.hardware import Hardware
from engine.whatif.recipe import BYTES, EstimateRecipe, resolve_dtypes
from engine.whatif.shapes import ModelShape

GB = 1e9
MEMORY_HEADROOM = 0.95  # share of the capacity an engine can use (allocator fragmentation, other users)
RUNTIME_OVERHEAD_GB = {"gpu": 1.0, "cpu": 0.5}  # CUDA context + workspaces / Python + torch runtime


def weights_bytes(shape: ModelShape, weight_dtype: str) -> float:
    """All parameters in the stored precision (quantization scales ignored)."""
    return shape.params * BYTES[weight_dtype]


def kv_bytes_per_token_per_gpu(shape: ModelShape, kv_dtype: str, tp: int = 1) -> float:
    """KV bytes per token on one GPU: heads are split over tp (replicated when kv_heads < tp)."""
    heads_per_gpu = math.ceil(shape.kv_heads / tp)
    return 2 * shape.layers * heads_per_gpu * shape.head_dim * BYTES[kv_dtype]


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU: weights, KV cache, activations (prefill peak), runtime overhead."""

    weights: float
    kv_per_token: float
    kv_total: float
    activations: float
    overhead: float
    capacity: float
    usable: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_total + self.activations + self.overhead

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    def to_dict(self) -> dict[str, float | bool]:
        d: dict[str, float | bool] = asdict(self)
        d.update(total=self.total, fits=self.fits)
        return d


def _act_per_token(shape: ModelShape, weight: str, tp: int) -> float:
    act = 4 if weight == "fp32" else 2
    return (3 * shape.hidden + 2 * shape.intermediate / tp) * act


def memory(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int) -> Memory:
    """Memory per GPU for a batch of ``recipe.batch_size`` sequences of prompt + output tokens.

    Activations are the prefill working set of one layer (hidden states, MLP intermediates)
    plus the float32 logits of the last position; attention scores are not materialized
    (SDPA/flash kernels).
    """
    shape = shape.dropped(recipe.drop_layers)
    weight, kv = resolve_dtypes(recipe, hw)
    b, tp = recipe.batch_size, recipe.tp
    ctx = prompt + output
    kv_ctx = min(ctx, shape.sliding_window) if shape.sliding_window else ctx
    kv_tok = kv_bytes_per_token_per_gpu(shape, kv, tp)
    act = b * prompt * _act_per_token(shape, weight, tp) + b * shape.vocab * 4
    return Memory(
        weights=weights_bytes(shape, weight) / tp,
        kv_per_token=kv_tok,
        kv_total=b * kv_ctx * kv_tok,
        activations=act,
        overhead=RUNTIME_OVERHEAD_GB[hw.kind] * GB,
        capacity=hw.memory_bytes,
        usable=hw.memory_bytes * MEMORY_HEADROOM,
    )


def largest_fit(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int) -> tuple[int, int]:
    """(largest batch at this context, largest context at this batch) that fit; 0 when none.

    The context is capped at the model's declared maximum and counts prompt + output tokens.
    """
    mem = memory(shape, hw, replace(recipe, batch_size=1), prompt, output)
    free = mem.usable - mem.weights - mem.overhead
    per_seq = mem.kv_total + mem.activations
    max_batch = max(0, int(free // per_seq)) if per_seq > 0 else 0
    weight, _ = resolve_dtypes(recipe, hw)
    b = recipe.batch_size
    per_token = b * (mem.kv_per_token + _act_per_token(shape, weight, recipe.tp))
    room = free - b * shape.vocab * 4
    max_ctx = max(0, int(room // per_token)) if room > 0 else 0
    if shape.max_positions:
        max_ctx = min(max_ctx, shape.max_positions)
    return max_batch, max_ctx


TP_DEGREES: tuple[int, ...] = (2, 4, 8, 16)
SMALLER_WEIGHTS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8", "int4")  # largest first: the smallest change


def _gb(value: float) -> str:
    return f"{value / GB:.0f} GB" if value >= 10 * GB else f"{value / GB:.1f} GB"


def fitting_tp(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int) -> int | None:
    """The smallest tensor-parallel degree above the recipe's that fits (GPUs with an interconnect figure)."""
    if hw.kind != "gpu" or not hw.interconnect_gbs:
        return None
    for tp in TP_DEGREES:
        if tp > recipe.tp and shape.heads % tp == 0 and memory(shape, hw, replace(recipe, tp=tp), prompt, output).fits:
            return tp
    return None


def fitting_precision(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int) -> str | None:
    """The largest weight precision below the recipe's that fits (one the device has a path for)."""
    weight, _ = resolve_dtypes(recipe, hw)
    for dtype in SMALLER_WEIGHTS:
        native = dtype == "int4" or hw.tflops.get("bf16" if dtype == "bf16" else dtype)
        if BYTES[dtype] < BYTES[weight] and native:
            if memory(shape, hw, replace(recipe, dtype=dtype), prompt, output).fits:
                return dtype
    return None


def no_fit_text(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, prompt: int, output: int) -> str | None:
    """``does not fit: needs 141 GB, 76 GB usable — try tensor parallel 2 or int4``; None when it fits.

    The suggestions come from the same memory model: the smallest tensor-parallel degree that
    fits, the largest smaller weight precision that fits, and the largest batch that fits.
    """
    mem = memory(shape, hw, recipe, prompt, output)
    if mem.fits:
        return None
    tries = []
    tp = fitting_tp(shape, hw, recipe, prompt, output)
    if tp:
        tries.append(f"tensor parallel {tp}")
    dtype = fitting_precision(shape, hw, recipe, prompt, output)
    if dtype:
        tries.append(dtype)
    max_batch, _ = largest_fit(shape, hw, recipe, prompt, output)
    if 1 <= max_batch < recipe.batch_size:
        tries.append(f"batch size {max_batch}")
    advice = (
        "try " + " or ".join(tries)
        if tries
        else "no tensor-parallel degree, smaller precision or batch fits this device: pick a larger one"
    )
    return f"does not fit: needs {_gb(mem.total)}, {_gb(mem.usable)} usable — {advice}"
