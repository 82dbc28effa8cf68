"""The ``sessions`` source: a dataset's conversations as multi-turn sessions whose later turns carry the replies
the engine really returned, a think time apart. Planned by :mod:`engine.run.sources.sessions`."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from engine.jsonvalue import JSONObject
from engine.spec.sources.base import FILE_LABELS, FileInput, OutputLengths, TrafficSource, base_name
from engine.spec.sources.dataset import DATASET_LABELS


class SessionsTraffic(TrafficSource, FileInput, OutputLengths):
    """Each sampled conversation of a dataset is a session; ``requests`` counts turns."""

    source: Literal["sessions"] = "sessions"
    dataset: str = Field(
        min_length=1, max_length=4096, description="Dataset of conversations: a local file or folder, or hf:ID[:SPLIT]"
    )
    dataset_format: Literal["sharegpt", "openai-chat"] = Field(
        default="sharegpt", description="Dataset format: sharegpt | openai-chat (conversations)"
    )
    think_time_s: float = Field(
        default=0.0, ge=0, le=3600, description="Sessions: mean seconds between a reply and the next turn"
    )

    label: ClassVar[str] = "multi-turn sessions"
    summary: ClassVar[str] = "a dataset's conversations, later turns carrying the real replies"
    planner: ClassVar[str] = "engine.run.sources.sessions:SessionsSource"
    selected_by: ClassVar[tuple[str, ...]] = ("dataset", "multi_turn")
    file_field: ClassVar[str | None] = "dataset"
    sessions: ClassVar[bool] = True
    needs_tokenizer: ClassVar[bool] = True
    legacy: ClassVar[bool] = True
    labels: ClassVar[dict[str, str]] = {
        **{k: DATASET_LABELS[k] for k in ("dataset", "dataset_format")},
        "think_time_s": "Think time between turns (s, mean)",
        **FILE_LABELS,
    }

    def title(self) -> str:
        return f"sessions of {base_name(self.dataset)}"

    def words(self) -> str:
        digest = f", sha256 {self.source_sha256[:12]}…" if self.source_sha256 else ""
        think = f", {self.think_time_s:g} s think time" if self.think_time_s else ""
        return f"multi-turn sessions from {base_name(self.dataset)} ({self.dataset_format}{digest}){think}"

    def flat_extras(self) -> JSONObject:
        return {"multi_turn": True}
