"""What the what-if estimator is asked about: precisions, the recipe and the workload."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.spec import engines
from engine.whatif.hardware import Hardware
from engine.whatif.shapes import EstimateError

# Bytes per element of a stored weight / KV entry (group scales ignored); int2 only for the KV cache.
BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "int2": 0.25}
ALIASES: dict[str, str] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float": "fp32",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
}
WEIGHT_DTYPES: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4")
KV_DTYPES: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4", "int2")
# Precision the matmuls run in, per weight format: fp8 and int8 as W8A8, int4 weight-only in bf16.
COMPUTE_PRECISION: dict[str, str] = {
    "fp32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "int4": "bf16",
}


def normalize_dtype(name: str, allowed: tuple[str, ...]) -> str:
    """``bfloat16`` -> ``bf16`` etc.; raises :class:`EstimateError` outside ``allowed``."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in allowed:
        raise EstimateError(f"precision {name!r} is not one of: {', '.join(allowed)}")
    return key


@dataclass(frozen=True)
class EstimateRecipe:
    """How the model is served: engine, weight and KV precision, batch size, tensor parallelism,
    and decoder layers dropped (pruning)."""

    engine: str = field(default_factory=lambda: engines.default().whatif.family)  # a what-if family
    dtype: str = "auto"
    kv_dtype: str = "auto"
    batch_size: int = 1
    tp: int = 1
    drop_layers: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype, WEIGHT_DTYPES))
        object.__setattr__(self, "kv_dtype", normalize_dtype(self.kv_dtype, KV_DTYPES))
        if not 1 <= self.batch_size <= 4096:
            raise EstimateError(f"batch size {self.batch_size} must be between 1 and 4096")
        if self.tp not in (1, 2, 4, 8, 16):
            raise EstimateError(f"tensor parallelism {self.tp} must be 1, 2, 4, 8 or 16")
        if not 0 <= self.drop_layers <= 1024:
            raise EstimateError(f"dropped layers {self.drop_layers} must be between 0 and 1024")


@dataclass(frozen=True)
class EstimateWorkload:
    """Prompt and output lengths per request and the requests in flight (default: one batch)."""

    prompt_tokens: int = 128
    output_tokens: int = 32
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.prompt_tokens <= 10_000_000:
            raise EstimateError(f"prompt tokens {self.prompt_tokens} must be between 1 and 10,000,000")
        if not 1 <= self.output_tokens <= 1_000_000:
            raise EstimateError(f"output tokens {self.output_tokens} must be between 1 and 1,000,000")
        if self.concurrency is not None and not 1 <= self.concurrency <= 100_000:
            raise EstimateError(f"concurrency {self.concurrency} must be between 1 and 100,000")


def resolve_dtypes(recipe: EstimateRecipe, hw: Hardware) -> tuple[str, str]:
    """(weight precision, KV precision) with ``auto`` made concrete for this hardware."""
    weight = recipe.dtype
    if weight == "auto":
        weight = "fp32" if hw.kind == "cpu" else ("bf16" if hw.tflops.get("bf16") else "fp16")
    kv = recipe.kv_dtype
    if kv == "auto":
        kv = weight if weight in ("fp32", "bf16", "fp16") else ("bf16" if hw.kind == "gpu" else "fp32")
    return weight, kv
