"""The ``prompt_file`` source: a user's prompts, one per line or JSONL objects with a ``prompt``; every request
asks for ``output_tokens``. Planned by :mod:`engine.run.sources.prompt_file`."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from engine.spec.sources.base import FILE_LABELS, FileInput, TrafficSource, base_name


class PromptFileTraffic(TrafficSource, FileInput):
    """A user's prompts from a file."""

    source: Literal["prompt_file"] = "prompt_file"
    prompt_file: str = Field(
        min_length=1, max_length=4096, description="a text file, one prompt per line (or JSONL with 'prompt')"
    )

    label: ClassVar[str] = "prompt file"
    summary: ClassVar[str] = "your prompts, one per line (or JSONL objects with a 'prompt')"
    planner: ClassVar[str] = "engine.run.sources.prompt_file:PromptFileSource"
    selected_by: ClassVar[tuple[str, ...]] = ("prompt_file",)
    file_field: ClassVar[str | None] = "prompt_file"
    needs_tokenizer: ClassVar[bool] = True
    legacy: ClassVar[bool] = True
    labels: ClassVar[dict[str, str]] = {"prompt_file": "Prompt file", **FILE_LABELS}

    def title(self) -> str:
        return f"prompts of {base_name(self.prompt_file)}"

    def words(self) -> str:
        digest = f" (sha256 {self.source_sha256[:12]}…)" if self.source_sha256 else ""
        return f"prompt file {base_name(self.prompt_file)}{digest}"
