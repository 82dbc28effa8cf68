"""Knobs of any OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp, TensorRT-LLM ...), measured over HTTP (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from engine.backends.openai import rules
from engine.spec.recipes import EngineRecipe

if TYPE_CHECKING:
    from engine.spec.workload import Workload


class OpenAIRecipe(EngineRecipe):
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
    max_model_len: int | None = Field(
        default=None,
        ge=16,
        le=10_000_000,
        description="The server's context in tokens, where its /v1/models gives no max_model_len (prompts are "
        "clipped, or refused with strict lengths, against it)",
    )
    timeout_s: float = Field(
        default=600.0,
        gt=0,
        le=86_400,
        description="Per-request timeout in seconds (checked every quarter of it, at most 1 s)",
    )

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        problem = rules.base_url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("api_key_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        problem = rules.api_key_env_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check_model_name(self) -> OpenAIRecipe:
        if not (self.model_name or "").strip():
            raise ValueError("model_name is required: the model name the server knows (see its /v1/models)")
        return self

    def job_problems(self, device: str, workload: Workload | None = None, model_kind: str | None = None) -> list[str]:
        """Nothing about the local device limits a remote server (pure)."""
        return rules.job_problems(device, model_kind)

    def describe(self) -> str:
        """The endpoint in words (never the key)."""
        return f"openai {self.endpoint} {self.model_name} @ {self.base_url}"

    def context_limit(self) -> int | None:
        return self.max_model_len
