"""Typed, pure job specifications.

Validation here never touches the file system, the environment or the network: it
checks shapes and ranges and says what is allowed. Whether a path exists or a model
fits its context is checked later by :mod:`engine.models` (still before anything is
queued or stored).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.catalog import SYNTHETIC_ARCHITECTURES

ModelKind = Literal["demo", "hf", "local", "gguf", "synthetic"]

_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class SpecError(ValueError):
    """A spec that cannot be run, with a message that says what would work."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Strict):
    """Where the weights come from.

    ``source`` is one of: ``demo``; ``synthetic:<architecture>``; a path ending in
    ``.gguf``; a local folder (absolute, ``./``/``../`` relative or ``~``); or a
    Hugging Face id ``org/name`` (optionally prefixed ``hf:``).
    """

    source: str = Field(min_length=1)
    revision: str | None = None

    @field_validator("source")
    @classmethod
    def _check_source(cls, value: str) -> str:
        value = value.strip()
        _classify(value)  # raises with a helpful message
        return value

    @property
    def kind(self) -> ModelKind:
        return _classify(self.source)

    @property
    def has_accuracy(self) -> bool:
        """Synthetic (random) weights give latency only."""
        return self.kind != "synthetic"

    @property
    def label(self) -> str:
        kind = self.kind
        if kind == "demo":
            return "demo (SmolLM2-135M-Instruct)"
        if kind == "hf":
            return self.source.removeprefix("hf:")
        return self.source


def _classify(source: str) -> ModelKind:
    if source == "demo":
        return "demo"
    if source.startswith("synthetic:"):
        arch = source.split(":", 1)[1]
        if arch not in SYNTHETIC_ARCHITECTURES:
            allowed = ", ".join(sorted(SYNTHETIC_ARCHITECTURES))
            raise ValueError(f"unknown synthetic architecture {arch!r}; choose one of: {allowed}")
        return "synthetic"
    if source.lower().endswith(".gguf"):
        return "gguf"
    if source.startswith(("/", "./", "../", "~")) or source == ".":
        return "local"
    bare = source.removeprefix("hf:")
    if _HF_ID.match(bare):
        return "hf"
    raise ValueError(
        f"model {source!r} is not a known source; use 'demo', 'synthetic:<architecture>', "
        "a Hugging Face id like 'org/name', a local folder path (./dir or /abs/dir) or a .gguf file"
    )


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
Speculative = Literal["none", "prompt_lookup", "assistant", "early_exit"]
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class TransformersRecipe(_Strict):
    """Knobs of the Hugging Face transformers engine.

    Every field is a flat, typed knob (Literal, bool, int, float or ``str | None``) with a
    description, so forms can be built from the class generically. The defaults keep the
    plain engine: nothing quantized, dynamic cache, no compile, no speculation. Which
    combinations a device can run is said by :mod:`engine.capabilities`.
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

    @model_validator(mode="after")
    def _check_knobs(self) -> TransformersRecipe:
        from engine.capabilities import recipe_problems

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
        return self

    def job_problems(self, device: str, workload: Workload | None = None, model_kind: str | None = None) -> list[str]:
        """What this device kind and model kind cannot run with the recipe (pure)."""
        problems: list[str] = []
        gpus = 0 if device == "cpu" else len(device.split(":", 1)[1].split(","))
        if gpus == 0:
            if self.dtype == "float16":
                problems.append("vLLM's CPU backend has no float16; use float32 (or bfloat16 on AVX512-BF16 CPUs)")
            if self.quantization == "fp8":
                problems.append("quantization=fp8 fails on vLLM's CPU backend; try kv_cache_dtype=fp8 or a GPU")
            if self.quantization in ("gptq_marlin", "awq_marlin", "fp8_per_channel", "modelopt"):
                problems.append(f"{self.quantization} needs a CUDA GPU")
            if self.quantization == "int8_per_channel_weight_only" and self.dtype != "bfloat16":
                problems.append("int8_per_channel_weight_only runs on vLLM's CPU backend with dtype=bfloat16 only")
            if self.tensor_parallel_size > 1:
                problems.append("tensor_parallel_size > 1 needs that many CUDA GPUs (device cuda:0,1,...)")
        elif self.tensor_parallel_size != gpus:
            problems.append(
                f"tensor_parallel_size={self.tensor_parallel_size} but {gpus} GPU(s) picked; "
                f"pick a device with {self.tensor_parallel_size} GPU(s)"
            )
        if model_kind == "synthetic" and self.engine != "vllm":  # type: ignore[attr-defined]
            problems.append(
                "the managed vLLM server needs real weights and a tokenizer; synthetic weights run with "
                "engine vllm (in process, random weights built by vLLM), or use demo, a folder or org/name"
            )
        if model_kind == "synthetic" and self.speculative not in ("none", "ngram"):
            problems.append("speculative decoding with a draft model needs real weights; use ngram or a real model")
        return problems

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
        return ", ".join(parts)


class VllmRecipe(_VllmKnobs):
    """vLLM in this process (AsyncLLM, per-token streaming)."""

    engine: Literal["vllm"] = "vllm"


class VllmServerRecipe(_VllmKnobs):
    """A vLLM OpenAI API server started for the job on a loopback port, measured over HTTP, torn down."""

    engine: Literal["vllm-server"] = "vllm-server"
    endpoint: Literal["completions", "chat"] = Field(default="completions", description="API endpoint measured")
    extra_args: str | None = Field(
        default=None, description="More server command-line arguments, e.g. '--swap-space 4'"
    )
    startup_timeout_s: float = Field(default=900.0, gt=0, le=7200, description="Seconds to wait for /health")


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
ENGINES: tuple[str, ...] = ("transformers", "vllm", "vllm-server", "openai")
SERVING_ENGINES: tuple[str, ...] = ("vllm", "vllm-server", "openai")


Arrival = Literal["batch", "poisson", "gamma", "concurrency", "max"]
PromptLength = Literal["fixed", "uniform", "normal"]
# Workload fields whose defaults are left out of fingerprints (runs from before they existed keep theirs).
SERVING_DEFAULTS: dict[str, Any] = {
    "arrival": "batch",
    "rate": None,
    "burstiness": 1.0,
    "max_concurrency": None,
    "prompt_length": "fixed",
    "prompt_length_spread": 0.0,
    "slo_ttft_ms": None,
    "slo_tpot_ms": None,
    "slo_e2el_ms": None,
}


class Workload(_Strict):
    """What is sent: prompts, output length, how many requests, in what batches."""

    prompt_tokens: int | None = Field(default=128, ge=1, le=1_000_000)
    prompt_file: str | None = None
    output_tokens: int = Field(default=32, ge=1, le=100_000)
    requests: int = Field(default=8, ge=1, le=1_000_000)
    batch_size: int = Field(default=1, ge=1, le=4096)
    warmup_requests: int | None = Field(default=None, ge=0, le=10_000)  # None: one batch
    ignore_eos: bool = True
    seed: int = Field(default=0, ge=0)
    # Serving load (engine/load.py); the defaults keep the static-batch behaviour above.
    arrival: Arrival = Field(default="batch", description="batch | poisson | gamma | concurrency | max")
    rate: float | None = Field(default=None, gt=0, le=1_000_000, description="poisson/gamma: requests per second")
    burstiness: float = Field(default=1.0, gt=0, le=1000, description="gamma shape (1 = Poisson, <1 burstier)")
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000, description="most requests in flight")
    prompt_length: PromptLength = Field(default="fixed", description="prompt lengths: fixed | uniform | normal")
    prompt_length_spread: float = Field(default=0.0, ge=0, le=1, description="uniform/normal: relative spread")
    slo_ttft_ms: float | None = Field(default=None, gt=0, description="goodput SLO on TTFT (ms)")
    slo_tpot_ms: float | None = Field(default=None, gt=0, description="goodput SLO on TPOT (ms)")
    slo_e2el_ms: float | None = Field(default=None, gt=0, description="goodput SLO on E2EL (ms)")

    @property
    def warmup(self) -> int:
        """Warm-up requests actually sent (default: one batch, so shapes match)."""
        return self.batch_size if self.warmup_requests is None else self.warmup_requests

    @property
    def has_slo(self) -> bool:
        return any(v is not None for v in (self.slo_ttft_ms, self.slo_tpot_ms, self.slo_e2el_ms))

    @model_validator(mode="after")
    def _check_arrival(self) -> Workload:
        if self.arrival in ("poisson", "gamma") and self.rate is None:
            raise ValueError(f"arrival={self.arrival} needs a rate (requests per second)")
        if self.arrival == "concurrency" and self.max_concurrency is None:
            raise ValueError("arrival=concurrency needs max_concurrency")
        if self.arrival != "batch" and self.batch_size != 1:
            raise ValueError("batch_size is for arrival=batch; use max_concurrency with other arrivals")
        if self.arrival != "gamma" and self.burstiness != 1.0:
            raise ValueError("burstiness applies to arrival=gamma only")
        if self.prompt_length != "fixed" and self.prompt_file is not None:
            raise ValueError("prompt_length distributions apply to prompt_tokens, not to a prompt file")
        return self

    @model_validator(mode="after")
    def _one_prompt_source(self) -> Workload:
        if self.prompt_file is not None and self.prompt_tokens is not None:
            raise ValueError("give either prompt_tokens or prompt_file, not both")
        if self.prompt_file is None and self.prompt_tokens is None:
            raise ValueError("give prompt_tokens (a synthetic prompt of that length) or a prompt_file")
        return self


QUALITY_METRICS_HELP = "ppl | fidelity | task:<lm-eval task name, path/to/task.jsonl or lm-eval task.yaml>"
_TASK_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class QualitySpec(_Strict):
    """The accuracy phase of a job (empty ``metrics``: no accuracy phase).

    ``metrics``: ``ppl`` (perplexity on ``corpus``), ``fidelity`` (KL divergence, top-1
    agreement and greedy flips against the engine's reference recipe on the same device)
    and ``task:NAME`` (a local JSONL task file, or an lm-evaluation-harness task name).
    ``corpus``: ``default`` (standard-library docstrings), a text file path, or
    ``hf:<dataset>[:config[:split[:column]]]``. ``budget_tokens`` caps the corpus tokens
    scored; the corpus is cut into windows of ``window`` tokens every ``stride`` tokens.
    """

    metrics: tuple[str, ...] = ()
    corpus: str = Field(default="default", min_length=1)
    budget_tokens: int = Field(default=2048, ge=16, le=10_000_000)
    window: int = Field(default=512, ge=8, le=1_000_000)
    stride: int | None = Field(default=None, ge=1, le=1_000_000)  # None: = window (no overlap)
    flip_prompts: int = Field(default=4, ge=0, le=10_000)  # workload prompts used for greedy flips
    flip_tokens: int = Field(default=16, ge=1, le=4096)  # greedy tokens per prompt
    task_limit: int | None = Field(default=200, ge=1)  # examples per task (None: all)

    @field_validator("metrics", mode="before")
    @classmethod
    def _split_metrics(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part for part in value.split(",")]
        if isinstance(value, (list, tuple)):
            value = [str(v).strip() for v in value if str(v).strip() and str(v).strip() != "none"]
            return tuple(dict.fromkeys(value))  # keep order, drop repeats
        return value

    @field_validator("metrics")
    @classmethod
    def _check_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if item in ("ppl", "fidelity"):
                continue
            if item.startswith("task:"):
                name = item.split(":", 1)[1]
                if name.endswith((".jsonl", ".yaml", ".yml")) or _TASK_NAME.match(name):
                    continue
                raise ValueError(f"task {name!r} is neither a .jsonl/.yaml file nor an lm-eval task name")
            raise ValueError(f"unknown quality metric {item!r}; use {QUALITY_METRICS_HELP}")
        return value

    @field_validator("corpus")
    @classmethod
    def _check_corpus(cls, value: str) -> str:
        value = value.strip()
        if value.startswith("hf:") and not value[3:].split(":")[0]:
            raise ValueError("corpus 'hf:' needs a dataset name, e.g. hf:wikitext:wikitext-2-raw-v1:test:text")
        return value

    @model_validator(mode="after")
    def _check_window(self) -> QualitySpec:
        if self.stride is not None and self.stride > self.window:
            raise ValueError(f"quality stride ({self.stride}) must not exceed the window ({self.window})")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.metrics)

    @property
    def tasks(self) -> tuple[str, ...]:
        """Task names (without the ``task:`` prefix), in the order given."""
        return tuple(m.split(":", 1)[1] for m in self.metrics if m.startswith("task:"))


_DEVICE = re.compile(r"^(cpu|cuda:\d+(,\d+)*)$")


class JobSpec(_Strict):
    """One benchmark: a model, an engine recipe, a workload, on a device."""

    model: ModelSpec
    recipe: Recipe = Field(default_factory=TransformersRecipe)
    workload: Workload = Field(default_factory=Workload)
    device: str = "cpu"
    name: str | None = Field(default=None, max_length=200)
    quality: QualitySpec = Field(default_factory=QualitySpec)

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        value = value.strip().lower()
        if not _DEVICE.match(value):
            raise ValueError(f"device {value!r} is not 'cpu', 'cuda:N' or 'cuda:N,M,...'")
        return value

    @model_validator(mode="after")
    def _check_combination(self) -> JobSpec:
        if isinstance(self.recipe, TransformersRecipe):
            from engine.capabilities import job_problems

            problems = job_problems(self.recipe, self.device, self.workload, self.model.kind)
        else:  # the serving engines' recipes say what they cannot run themselves
            problems = self.recipe.job_problems(self.device, self.workload, self.model.kind)
        if problems:
            raise ValueError("; ".join(problems))
        if self.quality.enabled and isinstance(self.recipe, TransformersRecipe) and self.recipe.tensor_parallel:
            raise ValueError(
                "accuracy is not measured with tensor parallelism (sharding changes only the order of float sums); "
                "measure it on the same recipe without tensor_parallel, or drop the quality metrics"
            )
        if self.quality.enabled and not self.model.has_accuracy:
            raise ValueError(
                "synthetic weights have no accuracy: random weights make perplexity, fidelity and task scores "
                "meaningless; drop the quality metrics or use a real model (demo, org/name, a folder or a .gguf)"
            )
        return self

    def canonical_json(self) -> str:
        """Stable JSON: sorted keys, no spaces, defaults included."""
        return canonical_json(self.model_dump(mode="json"))

    def fingerprint(self) -> str:
        """Identity of what runs (the display name is left out)."""
        # A job without an accuracy phase keeps the fingerprint it had before quality existed.
        exclude = {"name"} if self.quality.enabled else {"name", "quality"}
        data = self.model_dump(mode="json", exclude=exclude)
        for key, default in SERVING_DEFAULTS.items():  # serving fields at their defaults keep old fingerprints
            if data["workload"].get(key) == default:
                data["workload"].pop(key, None)
        if data["recipe"].get("engine") == "transformers":  # recipe knobs at their defaults keep old fingerprints
            for key, default in TRANSFORMERS_KNOB_DEFAULTS.items():
                if data["recipe"].get(key) == default:
                    data["recipe"].pop(key, None)
        return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:16]


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def parse_job_spec(data: dict[str, Any] | str) -> JobSpec:
    """Validate a spec from a dict or JSON text; raise :class:`SpecError` with one line."""
    try:
        if isinstance(data, str):
            return JobSpec.model_validate_json(data)
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc)) from exc


def format_validation_error(exc: ValidationError) -> str:
    """One readable line per problem, joined with '; '."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (not a knob of this spec)"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
