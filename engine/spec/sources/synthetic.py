"""The ``synthetic`` source: prompts of exact or drawn lengths cut from the default corpus (random token ids for
synthetic weights); every request asks for ``output_tokens``. Planned by :mod:`engine.run.sources.synthetic`."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from engine.spec.rules import Dependency, unused_knob_problems
from engine.spec.sources.base import TrafficSource

if TYPE_CHECKING:
    from engine.spec.workload import Workload

PromptLength = Literal["fixed", "uniform", "normal"]
SYNTHETIC_LABELS: dict[str, str] = {
    "prompt_tokens": "Prompt tokens",
    "prompt_length": "Prompt lengths",
    "prompt_length_spread": "Prompt length spread (0-1)",
}


class SyntheticLengths(TrafficSource):
    """Synthetic prompt lengths: fixed, or drawn around ``prompt_tokens`` (shared by ``prefixes``)."""

    prompt_tokens: int = Field(default=128, ge=1, le=1_000_000, description="synthetic prompt length (tokens)")
    prompt_length: PromptLength = Field(default="fixed", description="prompt lengths: fixed | uniform | normal")
    prompt_length_spread: float = Field(default=0.0, ge=0, le=1, description="uniform/normal: relative spread")

    dependencies: ClassVar[tuple[Dependency, ...]] = (
        ("prompt_length_spread", lambda v: v["prompt_length"] != "fixed", "prompt_length=uniform or normal"),
    )

    def nominal_prompt_tokens(self) -> int | None:
        return self.prompt_tokens

    def one_prompt_length(self) -> bool:
        return self.prompt_length == "fixed"

    def shape_words(self) -> str:
        if self.prompt_length == "fixed":
            return f"{self.prompt_tokens:,}-token"
        return f"{self.prompt_length} {self.prompt_tokens:,}±{self.prompt_length_spread:.0%}-token"

    def problems(self, workload: Workload) -> list[str]:
        return unused_knob_problems(self.dependencies, dict(self), self.field_defaults())


class SyntheticTraffic(SyntheticLengths):
    """Prompts of exact or drawn lengths from the default corpus."""

    source: Literal["synthetic"] = "synthetic"

    label: ClassVar[str] = "synthetic"
    summary: ClassVar[str] = "prompts of a set length, cut from the default corpus"
    planner: ClassVar[str] = "engine.run.sources.synthetic:SyntheticSource"
    legacy: ClassVar[bool] = True
    labels: ClassVar[dict[str, str]] = SYNTHETIC_LABELS

    def title(self) -> str:
        return f"{self.shape_words()} prompts"

    def words(self) -> str:
        return f"synthetic {self.shape_words()} prompts"
