"""Conversations as prompt token ids: the model's chat template, and prompts cut to fit the context."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from engine.backends.base import Message, Tokenizer, chat_prompt_ids
from engine.spec import SpecError

if TYPE_CHECKING:
    from engine.data.conversations import Message as DatasetMessage


def chat_ids(tokenizer: Tokenizer, messages: Sequence[Mapping[str, str]]) -> list[int]:
    """``messages`` rendered by the tokenizer's chat template (with the assistant's turn opened), as token
    ids (:func:`engine.backends.base.chat_prompt_ids`); a tokenizer without a template (a base model)
    joins the messages as ``role: content`` lines."""
    convo = [{"role": m["role"], "content": m["content"]} for m in messages]
    try:
        return chat_prompt_ids(tokenizer, convo)
    except (ValueError, TypeError, KeyError, AttributeError):  # no chat template, or one that refuses roles
        text = "".join(f"{m['role']}: {m['content']}\n" for m in convo) + "assistant:"
        return tokenizer.encode(text, add_special_tokens=False)


def messages_of(pairs: Sequence[DatasetMessage]) -> tuple[Message, ...]:
    """Dataset messages (``role``, ``content`` attributes) as the dicts engines and templates take."""
    return tuple({"role": m.role, "content": m.content} for m in pairs)


def fit(ids: list[int], output_tokens: int, context: int | None) -> tuple[list[int], int, bool]:
    """``(prompt, output)`` cut so that prompt + output fits ``context``: the prompt keeps its end (the
    latest turn), the output is cut only when it alone does not fit; and whether anything was cut."""
    if context is None or len(ids) + output_tokens <= context:
        return ids, output_tokens, False
    output = min(output_tokens, max(1, context // 2))
    return ids[len(ids) - (context - output) :], output, True


def refuse_or_fit(
    ids: list[int], output_tokens: int, context: int | None, strict: bool, where: str
) -> tuple[list[int], int, bool]:
    """:func:`fit`, or with ``strict`` a SpecError naming the request that does not fit."""
    if strict and context is not None and len(ids) + output_tokens > context:
        raise SpecError(
            f"{where}: {len(ids)} prompt tokens plus {output_tokens} output tokens exceed the model's context "
            f"of {context} (without strict_lengths it is clipped and counted)"
        )
    return fit(ids, output_tokens, context)


def session_chat_ids(
    tokenizer: Tokenizer, context: int | None, longest_output: int
) -> Callable[[Sequence[Message]], list[int]]:
    """The driver's ``chat_ids`` for a session's later turns: the conversation so far rendered, its
    start cut when it no longer fits beside the longest output (the latest turns are kept)."""

    def ids(messages: Sequence[Message]) -> list[int]:
        prompt = chat_ids(tokenizer, messages)
        return fit(prompt, longest_output, context)[0]

    return ids
