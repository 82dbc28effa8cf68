"""What an OpenAI-compatible server says it serves, and the context a run plans against.

``GET /v1/models`` lists the served models; vLLM gives each one's ``max_model_len`` (its context in
tokens: prompt plus output), other servers often nothing. The context a run plans against
(:class:`~engine.backends.base.LoadReport`'s ``context_length``: prompts clipped, or refused with
``--strict``) is the smaller of what the server publishes for the served model and the recipe's
``max_model_len`` (for a server that publishes none), with where it came from; unknown, the run says so.
A request the server refuses for its length (HTTP 400 with vLLM's "maximum context length", SGLang's,
TGI's, llama.cpp's or OpenAI's words) fails as ``refused by the server: prompt beyond its context``.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONObject

if TYPE_CHECKING:
    from engine.backends.openai.http import Client

UNKNOWN_NOTE = (
    "the server's context length is unknown (its /v1/models gives no max_model_len for the model and the recipe "
    "sets none): prompts were neither clipped nor refused against it; the server may refuse long ones or shorten "
    "their outputs (set max_model_len, --max-model-len)"
)
REFUSED = "refused by the server: prompt beyond its context"
_CONTEXT_WORDS = re.compile(
    r"context[ _]length|context size|maximum model length|max_model_len|max_total_tokens|max_new_tokens` must be",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Served:
    """The models a server lists (None: it did not answer ``/models``) and their context lengths where given."""

    models: list[str] | None
    context: dict[str, int]


def parse_models(body: bytes | str) -> Served:
    """``/v1/models``'s JSON body as model ids and their ``max_model_len`` (whole numbers above 0 only)."""
    data = json.loads(body)
    listed = data.get("data") if isinstance(data, dict) else None
    entries = [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
    context = {
        str(m.get("id")): m["max_model_len"]
        for m in entries
        if type(m.get("max_model_len")) is int and m["max_model_len"] > 0
    }
    return Served([m.get("id") for m in entries], context)


async def probe_models(http: Client, timeout_s: float = 10.0) -> Served | None:
    """What ``GET /models`` says (None: no answer, an error status, or not the JSON of a model list)."""
    from engine.backends.openai.http import HttpError

    try:
        async with asyncio.timeout(timeout_s):
            status, body = await http.fetch("GET", "/models")
        return parse_models(body) if status == 200 else None
    except (TimeoutError, HttpError, ValueError, AttributeError):
        return None


@dataclass(frozen=True)
class Context:
    """The context a run plans against: its length (None: unknown), where it came from, and a note when unknown."""

    length: int | None
    source: str  # "server" (/v1/models), "recipe" (max_model_len), "server and recipe" (the smaller), "unknown"

    def facts(self) -> JSONObject:
        """Its provenance: ``context_length``, ``context_length_source`` and, unknown, ``context_note``."""
        out: JSONObject = {"context_length": self.length, "context_length_source": self.source}
        if self.length is None:
            out["context_note"] = UNKNOWN_NOTE
        return out


def context_of(served: Served | None, model: str, recipe_value: int | None) -> Context:
    """The served model's published context, the recipe's ``max_model_len``, or the smaller of both."""
    published = served.context.get(model) if served is not None else None
    if published is not None and recipe_value is not None:
        return Context(min(published, recipe_value), "server and recipe")
    if published is not None:
        return Context(published, "server")
    if recipe_value is not None:
        return Context(recipe_value, "recipe")
    return Context(None, "unknown")


def refused_for_length(status: int, message: str) -> bool:
    """Whether an error answer says the prompt (with its output) is beyond the server's context."""
    return status in (400, 413, 422) and _CONTEXT_WORDS.search(message) is not None
