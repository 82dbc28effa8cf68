"""The ``dataset`` source: one request per sampled conversation of a dataset (ShareGPT, OpenAI chat, a text
column; a local file or folder, or ``hf:ID[:SPLIT]``), optionally behind shared prefixes. Planned by
:mod:`engine.run.sources.dataset`; the ``sessions`` source reads the same datasets as conversations."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from engine.spec.sources.base import (
    FILE_LABELS,
    PREFIX_LABELS,
    FileInput,
    OutputLengths,
    SharedPrefixOptions,
    TrafficSource,
    base_name,
)

if TYPE_CHECKING:
    from engine.spec.workload import Workload

DatasetFormat = Literal["sharegpt", "openai-chat", "text"]
DATASET_LABELS: dict[str, str] = {
    "dataset": "Dataset (file, folder or hf:ID[:SPLIT])",
    "dataset_format": "Dataset format",
    "dataset_column": "Dataset column (text format)",
    "min_prompt_tokens": "Shortest prompt kept (tokens)",
    "max_prompt_tokens": "Longest prompt kept (tokens)",
    **FILE_LABELS,
}


class DatasetTraffic(TrafficSource, FileInput, OutputLengths, SharedPrefixOptions):
    """A dataset's conversations (or text prompts), one request each."""

    source: Literal["dataset"] = "dataset"
    dataset: str = Field(min_length=1, max_length=4096, description="Dataset: a local file or folder, or hf:ID[:SPLIT]")
    dataset_format: DatasetFormat = Field(
        default="sharegpt", description="Dataset format: sharegpt | openai-chat | text"
    )
    dataset_column: str | None = Field(default=None, max_length=200, description="Dataset (text format): the column")
    min_prompt_tokens: int | None = Field(default=None, ge=1, le=1_000_000, description="Dataset: shortest prompt kept")
    max_prompt_tokens: int | None = Field(default=None, ge=1, le=1_000_000, description="Dataset: longest prompt kept")

    label: ClassVar[str] = "dataset"
    summary: ClassVar[str] = "ShareGPT / OpenAI chat / a text column, a local file or hf:ID"
    planner: ClassVar[str] = "engine.run.sources.dataset:DatasetSource"
    selected_by: ClassVar[tuple[str, ...]] = ("dataset",)
    file_field: ClassVar[str | None] = "dataset"
    needs_tokenizer: ClassVar[bool] = True
    legacy: ClassVar[bool] = True
    labels: ClassVar[dict[str, str]] = {**DATASET_LABELS, **PREFIX_LABELS}

    def title(self) -> str:
        return f"dataset {base_name(self.dataset)}"

    def words(self) -> str:
        digest = f", sha256 {self.source_sha256[:12]}…" if self.source_sha256 else ""
        return f"dataset {base_name(self.dataset)} ({self.dataset_format}{digest}){self.prefix_words()}"

    def problems(self, workload: Workload) -> list[str]:
        problems = self.prefix_problems()
        if self.dataset_format == "text" and not self.dataset_column:
            problems.append("dataset_format=text needs dataset_column (the column holding the prompts)")
        if self.dataset_column and self.dataset_format != "text":
            problems.append("dataset_column is only used with dataset_format=text")
        lo, hi = self.min_prompt_tokens, self.max_prompt_tokens
        if lo is not None and hi is not None and lo > hi:
            problems.append("min_prompt_tokens must not exceed max_prompt_tokens")
        return problems
