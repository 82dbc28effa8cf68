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


class TransformersRecipe(_Strict):
    """Knobs of the Hugging Face transformers engine."""

    engine: Literal["transformers"] = "transformers"
    dtype: DType = "auto"
    attn_implementation: Attention = "auto"

    def describe(self) -> str:
        parts = [self.engine, f"dtype={self.dtype}"]
        if self.attn_implementation != "auto":
            parts.append(f"attn={self.attn_implementation}")
        return ", ".join(parts)


Recipe = Annotated[TransformersRecipe, Field(discriminator="engine")]
ENGINES: tuple[str, ...] = ("transformers",)


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

    @property
    def warmup(self) -> int:
        """Warm-up requests actually sent (default: one batch, so shapes match)."""
        return self.batch_size if self.warmup_requests is None else self.warmup_requests

    @model_validator(mode="after")
    def _one_prompt_source(self) -> Workload:
        if self.prompt_file is not None and self.prompt_tokens is not None:
            raise ValueError("give either prompt_tokens or prompt_file, not both")
        if self.prompt_file is None and self.prompt_tokens is None:
            raise ValueError("give prompt_tokens (a synthetic prompt of that length) or a prompt_file")
        return self


QUALITY_METRICS_HELP = "ppl | fidelity | task:<lm-eval task name or path/to/task.jsonl>"
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
                if name.endswith(".jsonl") or _TASK_NAME.match(name):
                    continue
                raise ValueError(f"task {name!r} is neither a .jsonl file nor an lm-eval task name")
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
        recipe = self.recipe
        on_cpu = self.device == "cpu"
        if on_cpu and recipe.dtype == "float16":
            raise ValueError("float16 is not supported on the CPU; use float32 or bfloat16")
        if on_cpu and recipe.attn_implementation == "flash_attention_2":
            raise ValueError("flash_attention_2 needs a CUDA device; use sdpa or eager on the CPU")
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
