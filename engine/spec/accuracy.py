"""The accuracy phase of a job spec."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from engine.spec.base import _Strict

ACCURACY_METRICS_HELP = "ppl | fidelity | task:<lm-eval task name, path/to/task.jsonl or lm-eval task.yaml>"
_TASK_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class AccuracySpec(_Strict):
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
    def _split_metrics(cls, value: object) -> object:
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
            raise ValueError(f"unknown quality metric {item!r}; use {ACCURACY_METRICS_HELP}")
        return value

    @field_validator("corpus")
    @classmethod
    def _check_corpus(cls, value: str) -> str:
        value = value.strip()
        if value.startswith("hf:") and not value[3:].split(":")[0]:
            raise ValueError("corpus 'hf:' needs a dataset name, e.g. hf:wikitext:wikitext-2-raw-v1:test:text")
        return value

    @model_validator(mode="after")
    def _check_window(self) -> AccuracySpec:
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
