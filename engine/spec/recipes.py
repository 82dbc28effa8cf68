"""The engine recipes: every knob of every engine, typed and pure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from engine.spec.base import _Strict
from engine.spec.rules import recipe_problems, unused_knob_problems, vllm_job_problems
from engine.spec.server_flags import ALLOWED_LIST, server_extra_argv

if TYPE_CHECKING:
    from engine.spec.workload import Workload

DType = Literal["auto", "float32", "bfloat16", "float16"]
Attention = Literal["auto", "eager", "sdpa", "flash_attention_2"]
Quantization = Literal[
    "none",
    "torchao_int8_weight_only",
    "torchao_int8_dynamic",
    "torchao_int4_weight_only",
    "torchao_float8",
    "torch_dynamic_int8",
    "gptq",
    "bnb_nf4",
    "bnb_int8",
]
KVCacheQuantization = Literal["none", "quanto_int4", "quanto_int2", "hqq_int4", "hqq_int8"]
# How a recipe that runs the model's own Python code says so, wherever recipes are shown.
REMOTE_CODE_WORDS = "trusts remote code (runs the model's own Python)"
Speculative = Literal["none", "prompt_lookup", "assistant", "early_exit"]
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class TransformersRecipe(_Strict):
    """Knobs of the Hugging Face transformers engine.

    Every field is a flat, typed knob (Literal, bool, int, float or ``str | None``) with a
    description, so forms can be built from the class generically. The defaults keep the
    plain engine: nothing quantized, dynamic cache, no compile, no speculation. Which
    combinations a device can run is said by :mod:`engine.spec.rules`.
    """

    engine: Literal["transformers"] = "transformers"
    dtype: DType = Field(
        default="auto", description="Weight/activation precision (auto: float32 on CPU, bfloat16 on GPU)"
    )
    attn_implementation: Attention = Field(default="auto", description="Attention kernel (auto: sdpa)")
    quantization: Quantization = Field(default="none", description="Weight quantization method")
    gptq_bits: Literal[2, 3, 4, 8] = Field(default=4, description="GPTQ: bits per weight")
    gptq_group_size: int = Field(
        default=128, ge=-1, le=4096, description="GPTQ: weights per scale group (-1: per column)"
    )
    gptq_desc_act: bool = Field(default=False, description="GPTQ: quantize columns in order of decreasing activation")
    gptq_calibration_file: str | None = Field(
        default=None, description="GPTQ: calibration text file (empty: the bundled default corpus)"
    )
    cache_implementation: Literal["dynamic", "static"] = Field(
        default="dynamic", description="KV cache: dynamic (grows) or static (preallocated, compilable)"
    )
    compile: bool = Field(default=False, description="torch.compile the forward pass (needs the static cache)")
    compile_mode: CompileMode = Field(default="default", description="torch.compile mode")
    kv_cache_quantization: KVCacheQuantization = Field(
        default="none", description="Quantized KV cache (backend and bits)"
    )
    speculative: Speculative = Field(default="none", description="Speculative decoding method")
    prompt_lookup_ngram: int = Field(
        default=3, ge=1, le=16, description="Prompt lookup: n-gram size matched in the prompt"
    )
    num_speculative_tokens: int = Field(default=10, ge=1, le=64, description="Draft tokens proposed per step")
    assistant_model: str | None = Field(
        default=None, description="Assistant (draft) model source with the same tokenizer, e.g. 'demo' or a folder"
    )
    early_exit_layer: int | None = Field(
        default=None, ge=1, le=1024, description="Self-speculative: draft with the first N layers"
    )
    drop_layers: int = Field(default=0, ge=0, le=1024, description="Pruning: decoder layers removed")
    drop_layers_from: Literal["end", "middle", "start"] = Field(
        default="middle",
        description="Pruning: which layers are removed (the first and last layer are kept for 'middle')",
    )
    batching: Literal["static", "continuous"] = Field(
        default="static", description="Static batches, or transformers' continuous batching (paged cache)"
    )
    tensor_parallel: bool = Field(
        default=False,
        description="Tensor parallelism (tp_plan='auto'): one process per GPU picked (on the CPU: see ranks)",
    )
    tensor_parallel_ranks: int | None = Field(
        default=None,
        ge=2,
        le=64,
        description="Tensor parallelism: processes (empty: one per GPU picked; on the CPU 2, sharing its cores)",
    )
    sliding_window: int | None = Field(
        default=None, ge=1, le=1_048_576, description="Sliding-window attention span, for models that support it"
    )
    cpu_threads: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="CPU: torch intra-op threads (empty: one per core; with tensor parallelism, the cores / ranks)",
    )
    trust_remote_code: bool = Field(
        default=False,
        description="Run Python code shipped with the model (off: built-in architectures only); an operator's choice, "
        "shown on the run",
    )

    @model_validator(mode="after")
    def _check_knobs(self) -> TransformersRecipe:
        problems = recipe_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def describe(self) -> str:
        """The recipe in words, naming only the knobs that differ from the defaults."""
        parts = [self.engine, f"dtype={self.dtype}"]
        if self.attn_implementation != "auto":
            parts.append(f"attn={self.attn_implementation}")
        if self.quantization == "gptq":
            parts.append(
                f"gptq int{self.gptq_bits} g{self.gptq_group_size}" + (" desc_act" if self.gptq_desc_act else "")
            )
        elif self.quantization != "none":
            parts.append(self.quantization)
        if self.cache_implementation != "dynamic":
            parts.append(f"{self.cache_implementation} cache")
        if self.compile:
            parts.append(f"compile({self.compile_mode})")
        if self.kv_cache_quantization != "none":
            parts.append(f"kv {self.kv_cache_quantization}")
        if self.speculative == "prompt_lookup":
            parts.append(f"prompt lookup n={self.prompt_lookup_ngram} k={self.num_speculative_tokens}")
        elif self.speculative == "assistant":
            parts.append(f"assistant {self.assistant_model} k={self.num_speculative_tokens}")
        elif self.speculative == "early_exit":
            parts.append(f"early exit @{self.early_exit_layer}")
        if self.drop_layers:
            parts.append(f"drop {self.drop_layers} layers ({self.drop_layers_from})")
        if self.batching != "static":
            parts.append(f"{self.batching} batching")
        if self.tensor_parallel:
            parts.append("tensor parallel" + (f" x{self.tensor_parallel_ranks}" if self.tensor_parallel_ranks else ""))
        if self.sliding_window is not None:
            parts.append(f"sliding window {self.sliding_window}")
        if self.cpu_threads is not None:
            parts.append(f"{self.cpu_threads} CPU thread" + ("s" if self.cpu_threads > 1 else ""))
        if self.trust_remote_code:
            parts.append(REMOTE_CODE_WORDS)
        return ", ".join(parts)


# Knobs added after the first runs were stored: at their defaults they stay out of fingerprints.
TRANSFORMERS_KNOB_DEFAULTS: dict[str, Any] = {
    name: info.default
    for name, info in TransformersRecipe.model_fields.items()
    if name not in ("engine", "dtype", "attn_implementation")
}


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


class _VllmKnobs(_Strict):
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
    trust_remote_code: bool = Field(
        default=False,
        description="Run Python code shipped with the model (off: built-in architectures only); an operator's choice, "
        "shown on the run",
    )

    @field_validator("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager", mode="before")
    @classmethod
    def _toggle(cls, value: Any) -> Any:
        if value is None:
            return "auto"
        if isinstance(value, bool):
            return "on" if value else "off"
        return value

    @model_validator(mode="after")
    def _check_vllm_knobs(self) -> _VllmKnobs:
        if self.speculative in ("draft", "eagle", "eagle3") and not self.speculative_model:
            raise ValueError(f"speculative={self.speculative} needs speculative_model (a draft model folder or id)")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min must not exceed prompt_lookup_max")
        problems = unused_knob_problems(self.engine, dict(self), self.field_defaults())  # type: ignore[attr-defined]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def job_problems(self, device: str, workload: Workload | None = None, model_kind: str | None = None) -> list[str]:
        """What this device kind and model kind cannot run with the recipe (pure; rules in engine.spec.rules)."""
        return vllm_job_problems(self, device, model_kind)

    def describe(self) -> str:
        """The recipe in words, naming only the knobs that differ from the defaults."""
        parts = [self.engine, f"dtype={self.dtype}"]  # type: ignore[attr-defined]
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


class VllmRecipe(_VllmKnobs):
    """vLLM in this process (AsyncLLM, per-token streaming)."""

    engine: Literal["vllm"] = "vllm"


class VllmServerRecipe(_VllmKnobs):
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


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class OpenAIRecipe(_Strict):
    """Any OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp, TensorRT-LLM ...), measured over HTTP.

    The API key is read from the environment variable *named* by ``api_key_env`` when the
    job runs; the key itself is never part of the spec, the database or the output.
    """

    engine: Literal["openai"] = "openai"
    base_url: str = Field(default="http://127.0.0.1:8000/v1", min_length=1, description="Server base URL")
    model_name: str | None = Field(default=None, description="The model name the server knows (required)")
    endpoint: Literal["completions", "chat"] = Field(default="completions", description="API endpoint measured")
    api_key_env: str | None = Field(default=None, description="Name of the environment variable holding the API key")
    send_ignore_eos: bool = Field(default=True, description="Send vLLM's ignore_eos extension for fixed lengths")
    timeout_s: float = Field(default=600.0, gt=0, le=86_400, description="Per-request timeout in seconds")

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url {value!r} must start with http:// or https://")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError("api_key_env is the NAME of an environment variable (letters, digits, _), not the key")
        return value

    @model_validator(mode="after")
    def _check_model_name(self) -> OpenAIRecipe:
        if not (self.model_name or "").strip():
            raise ValueError("model_name is required: the model name the server knows (see its /v1/models)")
        return self

    def job_problems(self, device: str, workload: Workload | None = None, model_kind: str | None = None) -> list[str]:
        """Nothing about the local device limits a remote server (pure)."""
        return []

    def describe(self) -> str:
        """The endpoint in words (never the key)."""
        return f"openai {self.endpoint} {self.model_name} @ {self.base_url}"


Recipe = Annotated[TransformersRecipe | VllmRecipe | VllmServerRecipe | OpenAIRecipe, Field(discriminator="engine")]
# The recipe class of every engine, in the order forms list them.
RECIPE_CLASSES: dict[str, type[_Strict]] = {
    "transformers": TransformersRecipe,
    "vllm": VllmRecipe,
    "vllm-server": VllmServerRecipe,
    "openai": OpenAIRecipe,
}
ENGINES: tuple[str, ...] = tuple(RECIPE_CLASSES)
SERVING_ENGINES: tuple[str, ...] = ("vllm", "vllm-server", "openai")
