"""Knobs of the Hugging Face transformers engine: every one typed, described and pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from engine.backends.transformers import rules
from engine.spec.recipes import REMOTE_CODE_HELP, REMOTE_CODE_WORDS, DType, EngineRecipe

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from engine.spec.workload import Workload

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


class TransformersRecipe(EngineRecipe):
    """Knobs of the Hugging Face transformers engine.

    Every field is a flat, typed knob (Literal, bool, int, float or ``str | None``) with a
    description, so forms can be built from the class generically. The defaults keep the
    plain engine: nothing quantized, dynamic cache, no compile, no speculation. Which
    combinations a device can run is said by :mod:`engine.backends.transformers.rules`.
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
    trust_remote_code: bool = Field(default=False, description=REMOTE_CODE_HELP)

    @model_validator(mode="after")
    def _check_knobs(self) -> TransformersRecipe:
        problems = rules.recipe_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def job_problems(self, device: str, workload: Workload | None = None, model_kind: str | None = None) -> list[str]:
        """What this device kind, workload and model kind cannot run with the recipe (rules in this package)."""
        return rules.job_problems(self, device, workload, model_kind)

    def accuracy_problems(self) -> list[str]:
        """Accuracy is not measured with tensor parallelism."""
        if not self.tensor_parallel:
            return []
        return [
            "accuracy is not measured with tensor parallelism (sharding changes only the order of float sums); "
            "measure it on the same recipe without tensor_parallel, or drop the quality metrics"
        ]

    def shape_problems(self, config: JSONObject | None, device: str) -> list[str]:
        """GPTQ groups and tensor-parallel ranks against the model's shapes; dropped layers against its depth."""
        return rules.shape_problems(self, config, device) + rules.layer_problems(self, config)

    def world_size(self, device: str) -> int:
        """One process per GPU picked (on the CPU, the recipe's ranks, default 2) with tensor parallelism; else 1."""
        return rules.tensor_parallel_world_size(self, device)

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
