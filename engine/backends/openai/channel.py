"""Messages between the load driver's process and its client processes: length-prefixed JSON over a socket pair.

Each message is a JSON object (orjson: plain lists of ints stay cheap) after its length as 4 bytes,
big-endian. A request travels as :func:`request_json`, a filled record back as :func:`record_json`
and is copied into the driver's own record by :func:`fill_record`, so the driver stores exactly the
records one process would have.
"""

from __future__ import annotations

import asyncio
import socket
import struct

from engine.backends.base import Request
from engine.jsonvalue import JSONList, JSONObject, JSONValue
from engine.measure.records import RequestRecord

try:
    from orjson import dumps as _dumps
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    import json

    def _dumps(obj: object) -> bytes:
        return json.dumps(obj).encode()

    _loads = json.loads

_HEADER = struct.Struct(">I")


def encode(message: JSONObject) -> bytes:
    """One message as it travels: its length, then its JSON."""
    data = _dumps(message)
    return _HEADER.pack(len(data)) + data


def decode(data: bytes) -> JSONObject:
    """A message's JSON (without its length)."""
    message: JSONObject = _loads(data)
    return message


def write(writer: asyncio.StreamWriter, message: JSONObject) -> None:
    """Queue one message on ``writer`` (the transport buffers it: never blocks the loop)."""
    writer.write(encode(message))


async def read(reader: asyncio.StreamReader) -> JSONObject:
    """The next message; ``asyncio.IncompleteReadError`` when the other side is gone."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return decode(await reader.readexactly(size))


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from a blocking socket (before any event loop); ConnectionError when it closes first."""
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("the other side closed the socket")
        data += part
    return data


def request_json(request: Request) -> list[JSONValue]:
    return [
        request.prompt,
        request.max_new_tokens,
        request.ignore_eos,
        None if request.messages is None else [dict(m) for m in request.messages],
        request.want_text,
    ]


def request_of(data: JSONList) -> Request:
    prompt, max_new_tokens, ignore_eos, messages, want_text = data
    return Request(
        prompt=list(prompt),
        max_new_tokens=int(max_new_tokens),
        ignore_eos=bool(ignore_eos),
        messages=None if messages is None else tuple(messages),
        want_text=bool(want_text),
    )


def record_json(record: RequestRecord) -> list[JSONValue]:
    """What a client process filled in: the send stamp, the chunks, the server's prompt count (and its
    prefix-cache hits), error, text."""
    return [
        record.send_ns,
        record.chunk_ns,
        record.chunk_tokens,
        record.prompt_tokens,
        record.error,
        record.text,
        record.cached_prompt_tokens,
    ]


def fill_record(record: RequestRecord, data: JSONList, clock_offset_ns: int = 0) -> None:
    """Copy a client process's ``record_json`` into the driver's record, its stamps moved onto the driver's
    clock by ``clock_offset_ns`` (the process's clock minus the driver's: 0 on one host)."""
    send_ns, chunk_ns, chunk_tokens, prompt_tokens, error, text, cached = data
    record.send_ns = (int(send_ns) - clock_offset_ns) if send_ns else record.send_ns
    record.chunk_ns[:] = [t - clock_offset_ns for t in chunk_ns] if clock_offset_ns else chunk_ns
    record.chunk_tokens[:] = chunk_tokens
    record.prompt_tokens = int(prompt_tokens)
    if error is not None:
        record.error = record.error or str(error)
    if text is not None:
        record.text = str(text)
    if cached is not None:
        record.cached_prompt_tokens = int(cached)
