"""Knobs of vLLM: the in-process engine and the managed vLLM server share them (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from engine.backends.vllm import rules
from engine.backends.vllm.server_flags import ALLOWED_LIST, server_extra_argv
from engine.spec.recipes import REMOTE_CODE_HELP, REMOTE_CODE_WORDS, DType, EngineRecipe
from engine.spec.rules import unused_knob_problems

if TYPE_CHECKING:
    from engine.spec.workload import Workload

VllmQuantization = Literal[
    "none",
    "fp8",
    "fp8_per_channel",
    "int8_per_channel_weight_only",
    "gptq",
    "gptq_marlin",
    "awq",
    "awq_marlin",
    "compressed-tensors",
    "torchao",
    "experts_int8",
    "modelopt",
]
VllmKVCacheDType = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"]
VllmSpeculative = Literal["none", "ngram", "draft", "eagle", "eagle3"]
Toggle = Literal["auto", "on", "off"]


class VllmKnobs(EngineRecipe):
    """The knobs shared by the in-process vLLM engine and the managed vLLM server.

    ``None`` means vLLM's own default for that knob. Which combinations a device can run
    is said by :meth:`job_problems` (pure).
    """

    dtype: DType = Field(
        default="auto", description="Weight/activation precision (auto: float32 on CPU, the model's on GPU)"
    )
    quantization: VllmQuantization = Field(default="none", description="vLLM quantization method (none: as stored)")
    kv_cache_dtype: VllmKVCacheDType = Field(default="auto", description="KV cache precision")
    max_num_seqs: int | None = Field(default=None, ge=1, le=65_536, description="Most sequences batched per step")
    max_num_batched_tokens: int | None = Field(
        default=None, ge=16, le=10_000_000, description="Most tokens per engine step"
    )
    max_model_len: int | None = Field(default=None, ge=16, le=10_000_000, description="Context length served")
    enable_prefix_caching: Toggle = Field(
        default="auto", description="Reuse KV blocks of shared prefixes (auto: vLLM's default)"
    )
    enable_chunked_prefill: Toggle = Field(
        default="auto", description="Split long prefills across steps (auto: vLLM's default)"
    )
    block_size: int | None = Field(default=None, ge=1, le=1024, description="KV cache block size in tokens")
    speculative: VllmSpeculative = Field(default="none", description="Speculative decoding method")
    num_speculative_tokens: int = Field(default=3, ge=1, le=64, description="Draft tokens proposed per step")
    prompt_lookup_min: int = Field(default=2, ge=1, le=64, description="ngram: shortest n-gram matched")
    prompt_lookup_max: int = Field(default=4, ge=1, le=64, description="ngram: longest n-gram matched")
    speculative_model: str | None = Field(default=None, description="draft/eagle: the draft model (folder or id)")
    tensor_parallel_size: int = Field(default=1, ge=1, le=64, description="GPUs a model is split across")
    enforce_eager: Toggle = Field(default="auto", description="Eager mode (auto: eager on CPU, CUDA graphs on GPU)")
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0, description="Share of GPU memory vLLM may use")
    cpu_kvcache_space_gib: int = Field(
        default=1, ge=1, le=4096, description="CPU: KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE)"
    )
    trust_remote_code: bool = Field(default=False, description=REMOTE_CODE_HELP)

    @field_validator("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager", mode="before")
    @classmethod
    def _toggle(cls, value: object) -> object:
        if value is None:
            return "auto"
        if isinstance(value, bool):
            return "on" if value else "off"
        return value

    @model_validator(mode="after")
    def _check_vllm_knobs(self) -> VllmKnobs:
        if self.speculative in ("draft", "eagle", "eagle3") and not self.speculative_model:
            raise ValueError(f"speculative={self.speculative} needs speculative_model (a draft model folder or id)")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min must not exceed prompt_lookup_max")
        problems = unused_knob_problems(rules.DEPENDENCIES, dict(self), self.field_defaults())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def job_problems(self, device: str, workload: Workload | None = None, model_kind: str | None = None) -> list[str]:
        """What this device kind and model kind cannot run with the recipe (pure; rules in this package)."""
        return rules.job_problems(self, device, model_kind)

    def describe(self) -> str:
        """The recipe in words, naming only the knobs that differ from the defaults."""
        parts = [self.engine, f"dtype={self.dtype}"]
        defaults = type(self).model_fields
        for key in (
            "quantization",
            "kv_cache_dtype",
            "max_num_seqs",
            "max_num_batched_tokens",
            "max_model_len",
            "enable_prefix_caching",
            "enable_chunked_prefill",
            "block_size",
            "tensor_parallel_size",
            "enforce_eager",
        ):
            value = getattr(self, key)
            if value != defaults[key].default:
                parts.append(f"{key}={value}")
        if self.speculative == "ngram":
            parts.append(f"ngram {self.prompt_lookup_min}-{self.prompt_lookup_max} k={self.num_speculative_tokens}")
        elif self.speculative != "none":
            parts.append(f"{self.speculative} {self.speculative_model} k={self.num_speculative_tokens}")
        if self.trust_remote_code:
            parts.append(REMOTE_CODE_WORDS)
        return ", ".join(parts)


class VllmRecipe(VllmKnobs):
    """vLLM in this process (AsyncLLM, per-token streaming)."""

    engine: Literal["vllm"] = "vllm"


class VllmServerRecipe(VllmKnobs):
    """A vLLM OpenAI API server started for the job on a loopback port, measured over HTTP, torn down."""

    engine: Literal["vllm-server"] = "vllm-server"
    endpoint: Literal["completions", "chat"] = Field(default="completions", description="API endpoint measured")
    extra_args: str | None = Field(
        default=None,
        description=f"More server tuning flags, e.g. '--seed 1'; only these: {ALLOWED_LIST}",
    )
    startup_timeout_s: float = Field(default=900.0, gt=0, le=7200, description="Seconds to wait for /health")

    @field_validator("extra_args")
    @classmethod
    def _check_extra_args(cls, value: str | None) -> str | None:
        server_extra_argv(value)  # raises with the allowed flags
        return value

    def extra_argv(self) -> list[str]:
        """``extra_args`` as the server's argv tokens (validated)."""
        return server_extra_argv(self.extra_args)
