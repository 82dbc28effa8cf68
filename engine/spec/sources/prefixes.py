"""The ``prefixes`` source: synthetic prompts behind a few shared system prompts (K prefixes of N tokens, each
request takes one, seeded), so a prefix cache sees them again. Planned by :mod:`engine.run.sources.synthetic`."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from engine.jsonvalue import JSONObject
from engine.spec.sources.base import PREFIX_LABELS
from engine.spec.sources.synthetic import SYNTHETIC_LABELS, SyntheticLengths


class PrefixesTraffic(SyntheticLengths):
    """Synthetic prompts, each behind one of ``prefix_count`` shared prefixes of ``prefix_tokens`` tokens."""

    source: Literal["prefixes"] = "prefixes"
    prompt_tokens: int = Field(
        default=128, ge=1, le=1_000_000, description="each prompt's own tokens, after its prefix"
    )
    prefix_count: int = Field(ge=1, le=100_000, description="Shared prefixes: how many")
    prefix_tokens: int = Field(ge=1, le=1_000_000, description="Shared prefixes: tokens each")

    label: ClassVar[str] = "shared prefixes"
    summary: ClassVar[str] = "synthetic prompts behind a few shared system prompts"
    planner: ClassVar[str] = "engine.run.sources.prefixes:PrefixesSource"
    selected_by: ClassVar[tuple[str, ...]] = ("prefix_count",)
    legacy: ClassVar[bool] = True
    labels: ClassVar[dict[str, str]] = {**SYNTHETIC_LABELS, **PREFIX_LABELS}
    launch_start: ClassVar[JSONObject] = {"prefix_count": 4, "prefix_tokens": 512}

    def nominal_prompt_tokens(self) -> int | None:
        return self.prefix_tokens + self.prompt_tokens

    def title(self) -> str:
        return f"{self.shape_words()} prompts, {self.prefix_count} prefixes of {self.prefix_tokens:,}"

    def words(self) -> str:
        return (
            f"synthetic {self.shape_words()} prompts behind {self.prefix_count} shared prefixes "
            f"of {self.prefix_tokens:,} tokens"
        )
