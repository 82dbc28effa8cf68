"""The simulated server: its scheduler's configuration, what it serves where, and its KV capacity.

The capacity is computed as vLLM computes it: the device's memory times
``gpu_memory_utilization``, less the weights on each GPU, the activation peak of its profiling
run (a forward pass of ``max_num_batched_tokens`` tokens, and the sampler's logits for
``max_num_seqs`` sequences) and the runtime's own memory, divided by the bytes one KV block
takes on one GPU. vLLM's CPU engine takes a fixed KV space instead (``VLLM_CPU_KVCACHE_SPACE``
GiB): give it as ``kv_cache_bytes``; ``num_blocks`` overrides both (``num_gpu_blocks_override``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.whatif.hardware import Hardware
from engine.whatif.memory import RUNTIME_OVERHEAD_GB, kv_bytes_per_token_per_gpu, weights_bytes
from engine.whatif.recipe import EstimateRecipe, resolve_dtypes
from engine.whatif.shapes import ModelShape

GB = 1e9


class DoesNotFit(ValueError):
    """The plan cannot run on this server; the message is one line naming what does not fit."""


class ConfigError(ValueError):
    """A server configuration the simulator cannot run; the message is one line."""


@dataclass(frozen=True)
class ServerConfig:
    """The scheduler's knobs, with vLLM's names and defaults where vLLM has one.

    ``static_batches``: an engine that serves one static batch at a time (transformers): at most
    ``max_num_seqs`` requests, admitted only when the previous batch has finished, each prompt
    whole (no token budget, no chunking).
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    block_size: int = 16
    prefix_caching: bool = True
    gpu_memory_utilization: float = 0.9
    num_blocks: int | None = None
    kv_cache_bytes: float | None = None  # per GPU; vLLM's CPU engine: VLLM_CPU_KVCACHE_SPACE GiB
    runtime_bytes: float | None = None  # per GPU, besides weights, activations and KV; None: the estimator's figure
    tensor_parallel: int = 1
    spec_tokens: int = 0  # speculative decoding: tokens proposed per step
    spec_acceptance: float = 0.0  # accepted / proposed, as vLLM's acceptance rate counts it
    static_batches: bool = False

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise ConfigError(problem)

    def _problem(self) -> str | None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1 or self.block_size < 1:
            return "max_num_seqs, max_num_batched_tokens and block_size must be at least 1"
        if not 0 < self.gpu_memory_utilization <= 1:
            return f"gpu_memory_utilization {self.gpu_memory_utilization} must be in (0, 1]"
        if self.num_blocks is not None and self.num_blocks < 1:
            return f"num_blocks {self.num_blocks} must be at least 1"
        if self.tensor_parallel not in (1, 2, 4, 8, 16):
            return f"tensor_parallel {self.tensor_parallel} must be 1, 2, 4, 8 or 16"
        if not 0 <= self.spec_tokens < self.block_size or not 0 <= self.spec_acceptance <= 1:
            return f"spec_tokens must be in [0, {self.block_size}) and spec_acceptance in [0, 1]"
        if not self.static_batches and self.max_num_batched_tokens < self.max_num_seqs * self.tokens_per_decode:
            return (
                f"max_num_batched_tokens {self.max_num_batched_tokens} is below max_num_seqs x tokens per decode "
                f"({self.max_num_seqs} x {self.tokens_per_decode}): every running decode must fit a step"
            )
        return None

    @staticmethod
    def static(batch_size: int = 1, **knobs: float | bool | None) -> ServerConfig:
        """An engine that serves one static batch of ``batch_size`` at a time (transformers): whole
        prompts, no prefix cache; other fields (the KV space ...) as given."""
        fields = {"max_num_seqs": batch_size, "chunked_prefill": False, "prefix_caching": False, **knobs}
        return ServerConfig(static_batches=True, **fields)

    @property
    def tokens_per_decode(self) -> int:
        """Tokens a decoding request schedules per step: 1, plus the proposed ones when speculating."""
        return 1 + self.spec_tokens

    @property
    def token_budget(self) -> int:
        """Tokens one step may schedule (unbounded for static batches)."""
        return 1 << 62 if self.static_batches else self.max_num_batched_tokens

    @property
    def chunking(self) -> bool:
        """Whether a prompt may be split over steps."""
        return self.chunked_prefill and not self.static_batches


@dataclass(frozen=True)
class Precisions:
    """Weight and KV-cache precisions, concrete (``bf16``, ``fp8`` ...)."""

    weight: str
    kv: str

    @staticmethod
    def resolve(hardware: Hardware, weight: str = "auto", kv: str = "auto") -> Precisions:
        """Precisions with ``auto`` made concrete for ``hardware``, as the static estimator does."""
        w, k = resolve_dtypes(EstimateRecipe(dtype=weight, kv_dtype=kv), hardware)
        return Precisions(w, k)


@dataclass(frozen=True)
class Served:
    """What is served where: the hardware entry (one GPU of a tensor-parallel group), the model's
    shape and its precisions."""

    hardware: Hardware
    shape: ModelShape
    precisions: Precisions


@dataclass(frozen=True)
class KvCapacity:
    """The KV pool: blocks, and the bytes per GPU that make it (0 where not computed)."""

    num_blocks: int
    block_bytes: float
    weights_bytes: float = 0.0
    activation_bytes: float = 0.0
    runtime_bytes: float = 0.0
    kv_bytes: float = 0.0

    def tokens(self, block_size: int) -> int:
        """Tokens the pool holds."""
        return self.num_blocks * block_size


def activation_bytes(config: ServerConfig, served: Served) -> float:
    """The profiling run's peak per GPU: one layer's working set for ``max_num_batched_tokens``
    tokens (hidden states and MLP intermediates) and float32 logits for ``max_num_seqs`` sequences."""
    shape, tp = served.shape, config.tensor_parallel
    act = 4 if served.precisions.weight == "fp32" else 2
    tokens = config.max_num_batched_tokens if not config.static_batches else config.max_num_seqs
    return tokens * (3 * shape.hidden + 2 * shape.intermediate / tp) * act + config.max_num_seqs * shape.vocab * 4


def _gb(value: float) -> str:
    return f"{value / GB:.1f} GB"


def kv_capacity(config: ServerConfig, served: Served) -> KvCapacity:
    """The KV blocks the server holds; :class:`DoesNotFit` when weights or one block do not fit."""
    tp = config.tensor_parallel
    block = config.block_size * kv_bytes_per_token_per_gpu(served.shape, served.precisions.kv, tp)
    if config.num_blocks is not None:
        return KvCapacity(config.num_blocks, block)
    weights = weights_bytes(served.shape, served.precisions.weight) / tp
    if config.kv_cache_bytes is not None:
        return _capacity(config.kv_cache_bytes, block, weights, 0.0, 0.0, served)
    hw = served.hardware
    usable = hw.memory_bytes * config.gpu_memory_utilization
    if weights > usable:
        raise DoesNotFit(
            f"weights of {_gb(weights)} per GPU do not fit {_gb(usable)} "
            f"({config.gpu_memory_utilization:g} of {hw.name}'s memory) at tensor parallel {tp}"
        )
    act = activation_bytes(config, served)
    runtime = config.runtime_bytes if config.runtime_bytes is not None else RUNTIME_OVERHEAD_GB[hw.kind] * GB
    return _capacity(usable - weights - act - runtime, block, weights, act, runtime, served)


def _capacity(kv: float, block: float, weights: float, act: float, runtime: float, served: Served) -> KvCapacity:
    blocks = math.floor(kv / block) if kv > 0 else 0
    if blocks < 1:
        raise DoesNotFit(
            f"no room for one KV block on {served.hardware.name}: {_gb(kv)} left after weights {_gb(weights)}, "
            f"activations {_gb(act)} and runtime {_gb(runtime)}"
        )
    return KvCapacity(blocks, block, weights, act, runtime, kv)


def blocks_needed(prompt: int, output: int, config: ServerConfig) -> int:
    """The most KV blocks one request holds: its prompt, then its last decode step's tokens."""
    last = prompt + output - 1 + config.spec_tokens if output > 1 else prompt
    return -(-max(prompt, last) // config.block_size)
