"""Conversations of a dataset as plain messages: ShareGPT, OpenAI chat, or a column of text.

- ``sharegpt``: records ``{"conversations": [{"from": ..., "value": ...}, ...]}`` (a JSON
  array or JSON lines), ``from`` one of human/user (a user turn), gpt/assistant/chatgpt/bing/
  bard (an assistant turn) or system, in any case.
- ``openai-chat``: records ``{"messages": [{"role": ..., "content": ...}, ...]}``, role one of
  system/developer (a system turn), user, assistant; content a string or a list of text parts.
- ``text``: one column (``column`` is required) of a JSON, CSV or parquet file or a Hugging Face
  dataset, each value one user message.

``column`` also renames the list column of the chat formats (default ``conversations`` and
``messages``). Where a source lives and how it is read: :mod:`engine.data.records`. Messages
whose content is blank or null are dropped; a conversation left with no user turn is skipped and
counted (``skipped["no user turn"]``: ShareGPT dumps hold empty conversations), and a dataset
with none at all fails. Anything malformed fails with its place and field (``FILE line N:
field 'conversations[2].from': ...``). The helpers below cut a conversation into what the
request sources send: the first request and the dataset's reply to it, and the turns in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from engine.data import hub
from engine.data.reading import listing, problem, shown
from engine.data.records import Record, records
from engine.spec import SpecError

FORMATS = ("sharegpt", "openai-chat", "text")
_DEFAULT_COLUMNS = {"sharegpt": "conversations", "openai-chat": "messages"}
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "system": "system",
}
OPENAI_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
NO_USER_TURN = "no user turn"


@dataclass(frozen=True, slots=True)
class Message:
    """One message: ``role`` is system, user or assistant."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Conversation:
    """A dataset's conversation and the place it came from (``FILE line N`` or ``SOURCE row N``)."""

    messages: tuple[Message, ...]
    where: str


@dataclass(frozen=True, slots=True)
class Turn:
    """A user turn and the dataset's reply to it (None when the conversation has none)."""

    user: str
    reply: str | None


class Conversations(Iterator[Conversation]):
    """The conversations of a dataset, read one at a time; ``read`` counts the records read so
    far and ``skipped`` the conversations left out, by reason."""

    def __init__(self, source: str, fmt: str, column: str | None = None) -> None:
        self.source = source
        self.fmt, self.column = checked_format(fmt, column)
        self.read = 0
        self.skipped: dict[str, int] = {}
        self._conversations = self._generate(records(source, (self.column,)))

    def __next__(self) -> Conversation:
        return next(self._conversations)

    def _generate(self, rows: Iterator[Record]) -> Iterator[Conversation]:
        kept = 0
        for where, record in rows:
            self.read += 1
            conversation = parse_record(self.fmt, self.column, where, record)
            if not any(m.role == "user" for m in conversation.messages):
                self.skipped[NO_USER_TURN] = self.skipped.get(NO_USER_TURN, 0) + 1
                continue
            kept += 1
            yield conversation
        if not self.read:
            raise SpecError(f"dataset {self.source} holds no records")
        if not kept:
            where = f"dataset {self.source}"
            raise problem(where, self.column, f"no conversation has a user turn ({self.read} records read)")


def read_conversations(source: str, fmt: str, column: str | None = None) -> Conversations:
    """The conversations of ``source`` (a local file or folder, or ``hf:ID[:SPLIT]``) in format
    ``fmt``, streamed: the source is checked now, its records are read as the caller iterates."""
    return Conversations(source, fmt, column)


def check_dataset(source: str, fmt: str, column: str | None = None) -> None:
    """A quick pre-flight: fail in one line for an unknown format, a missing or empty file, an
    unknown column, a first record that is malformed, or a Hub dataset that cannot be fetched.
    Only the first record is read; nothing is downloaded beyond it."""
    fmt, column = checked_format(fmt, column)
    if source.startswith(hub.PREFIX):
        hub.check_reachable(source)
    first = next(records(source, (column,)), None)
    if first is None:
        raise SpecError(f"dataset {source} holds no records")
    parse_record(fmt, column, *first)


def checked_format(fmt: str, column: str | None) -> tuple[str, str]:
    """``fmt`` checked, and the column it reads (``column``, or the format's default)."""
    if fmt not in FORMATS:
        raise SpecError(f"dataset format {shown(fmt)} is not one of {', '.join(FORMATS)}")
    if column is not None and not column.strip():
        raise SpecError("dataset column is blank: name the column to read")
    if column is None:
        if fmt == "text":
            raise SpecError("dataset format 'text' needs a column: name the column that holds the prompts")
        column = _DEFAULT_COLUMNS[fmt]
    return fmt, column


def parse_record(fmt: str, column: str, where: str, record: Mapping[str, object]) -> Conversation:
    """One record of a dataset as a conversation (blank messages dropped)."""
    if column not in record:
        raise problem(where, column, f"missing (the record has {listing(list(record)) or 'no fields'})")
    value = record[column]
    if fmt == "text":
        if value is None:  # a null cell: no text, like an empty one
            value = ""
        if not isinstance(value, str):
            raise problem(where, column, f"must be text, not {shown(value)}")
        messages = (Message("user", value),)
    elif fmt == "sharegpt":
        messages = _turns(where, column, value, ("from", "value"), SHAREGPT_ROLES)
    else:
        messages = _turns(where, column, value, ("role", "content"), OPENAI_ROLES)
    return Conversation(tuple(m for m in messages if m.content.strip()), where)


def _turns(where: str, column: str, value: object, keys: tuple[str, str], roles: dict[str, str]) -> list[Message]:
    if not isinstance(value, list):
        raise problem(where, column, f"must be a list of messages, not {shown(value)}")
    role_key, text_key = keys
    messages = []
    for i, turn in enumerate(value):
        field = f"{column}[{i}]"
        if not isinstance(turn, dict):
            raise problem(where, field, f"must be an object with {role_key!r} and {text_key!r}, not {shown(turn)}")
        if turn.get(role_key) is None:
            raise problem(where, f"{field}.{role_key}", "missing (or null)")
        if text_key not in turn:
            raise problem(where, f"{field}.{text_key}", "missing")
        role = turn[role_key]
        if not isinstance(role, str) or role.strip().lower() not in roles:
            raise problem(where, f"{field}.{role_key}", f"{shown(role)} is not one of {', '.join(roles)}")
        messages.append(Message(roles[role.strip().lower()], _content(where, f"{field}.{text_key}", turn[text_key])))
    return messages


def _content(where: str, field: str, value: object) -> str:
    """A message's text: a string, or (OpenAI chat) a list of ``{"type": "text", "text": ...}``
    parts; null is no text (an assistant turn that only calls tools)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if not isinstance(value, list):
        raise problem(where, field, f"must be text, not {shown(value)}")
    parts = []
    for i, part in enumerate(value):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise problem(where, f"{field}[{i}]", f"only text parts can be sent, not {shown(part)}")
        parts.append(part["text"])
    return "\n".join(parts)


def turns(conversation: Conversation) -> tuple[Turn, ...]:
    """The user turns in order, each with the dataset's reply to it (consecutive assistant
    messages joined); assistant messages before the first user turn and system messages after
    it are left out (the system prompt is :func:`system_messages`)."""
    found: list[tuple[str, str | None]] = []
    for message in conversation.messages:
        if message.role == "user":
            found.append((message.content, None))
        elif message.role == "assistant" and found:
            user, reply = found[-1]
            found[-1] = (user, message.content if reply is None else f"{reply}\n\n{message.content}")
    return tuple(Turn(user, reply) for user, reply in found)


def user_turns(conversation: Conversation) -> tuple[str, ...]:
    """The user turns' texts in order (a multi-turn session sends them one by one)."""
    return tuple(turn.user for turn in turns(conversation))


def system_messages(conversation: Conversation) -> tuple[Message, ...]:
    """The system messages before the first user turn: the conversation's system prompt."""
    leading = []
    for message in conversation.messages:
        if message.role == "user":
            break
        if message.role == "system":
            leading.append(message)
    return tuple(leading)


def first_request(conversation: Conversation) -> tuple[Message, ...]:
    """What a single-turn request sends: the system prompt (if any) and the first user turn."""
    first = next(m for m in conversation.messages if m.role == "user")
    return (*system_messages(conversation), first)


def first_reply(conversation: Conversation) -> str | None:
    """The dataset's reply to the first user turn (its token length is the request's output
    length), or None when the conversation has none."""
    found = turns(conversation)
    return found[0].reply if found else None
