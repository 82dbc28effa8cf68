"""Streamed reading of a user's data files, shared by the dataset and trace readers.

Nothing here loads a file whole: text files are read a line at a time (each line checked as
UTF-8 on its own, so the error names the line), a JSON array is decoded element by element
with :meth:`json.JSONDecoder.raw_decode` over a bounded buffer, CSV rows come from those
lines, and the content hash is computed over 256 KiB reads. A record is at most :data:`MAX_RECORD_BYTES`
long and its JSON nests at most :data:`MAX_JSON_DEPTH` levels (deeper would exhaust the decoder's stack, or
the stack of whatever walks the value next). Every problem is a
:class:`~engine.spec.SpecError` of one line that names its place the one way this package
does: ``FILE line N: field 'x': what is wrong`` (:func:`problem`), quoting at most a short
prefix of the user's value (:func:`shown`). A message quotes a file's content only as a field name and
such a value, never a line or a CSV header (any file's first line is taken for one).
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO

from engine.jsonvalue import JSONValue
from engine.spec import SpecError

CHUNK_BYTES = 1 << 18
MAX_RECORD_BYTES = 64 << 20  # one line, JSON element or CSV field; longer is not a record of a data file
MAX_JSON_DEPTH = 64  # a record nests a few levels (record, messages, a message, its parts); deeper is not data
_SHOWN_CHARS = 40
_WHITESPACE = " \t\n\r"
_SPACE = re.compile(r"[ \t\n\r]*")
_MIB = MAX_RECORD_BYTES >> 20
_DECODER = json.JSONDecoder()


def shown(value: object) -> str:
    """A user's value as an error quotes it: its ``repr``, cut to a short prefix."""
    text = repr(value) if not isinstance(value, str) else value
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "..."
    return repr(text) if isinstance(value, str) else text


def kind_of(value: object) -> str:
    """A JSON value's kind in words ("a list", "a string" ...): what a message says of a row instead of quoting it."""
    names = {list: "a list", str: "a string", bool: "true/false", type(None): "null", dict: "an object"}
    return names.get(type(value), "a number")


def listing(names: Sequence[str], most: int = 12) -> str:
    """Names as an error lists them: quoted, comma-separated, the first ``most`` of them."""
    text = ", ".join(shown(str(name)) for name in names[:most])
    return text + (f" and {len(names) - most} more" if len(names) > most else "")


def first_line(exc: BaseException) -> str:
    """A library's error as one short line: the first line of its message (or its type's name)."""
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def line_place(path: Path | str, line: int) -> str:
    """Where a record starts: ``FILE line N``."""
    return f"{path} line {line}"


def problem(where: str, field: str | None, what: str) -> SpecError:
    """The one-line error of a record: ``WHERE: field 'x': what is wrong`` (no field: ``WHERE: what``)."""
    return SpecError(f"{where}: field {field!r}: {what}" if field else f"{where}: {what}")


def existing_file(path: Path | str, what: str) -> Path:
    """``path`` as a Path, after checking that it is a readable, non-empty file."""
    file = Path(path).expanduser()
    if not file.exists():
        raise SpecError(f"{what} {file} does not exist")
    if not file.is_file():
        raise SpecError(f"{what} {file} is not a file")
    if file.stat().st_size == 0:
        raise SpecError(f"{what} {file} is empty")
    return file


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Every line of a UTF-8 text file with its number (from 1), its line ending kept.

    A leading byte-order mark is dropped. A line that is not UTF-8, or longer than
    :data:`MAX_RECORD_BYTES` characters, fails with its number.
    """
    with path.open(encoding="utf-8-sig", newline="\n") as file:
        number = 0
        try:
            while text := file.readline(MAX_RECORD_BYTES + 1):
                number += 1
                if len(text) > MAX_RECORD_BYTES:
                    raise SpecError(f"{path} line {number} is longer than {_MIB} Mi characters")
                yield number, text
        except UnicodeDecodeError as exc:
            raise _not_utf8(path) from exc


def _not_utf8(path: Path) -> SpecError:
    """The error naming the first line of a file that is not UTF-8 (a text file is decoded
    ahead in blocks, so the line is found by a second, incremental pass)."""
    try:
        with path.open("rb") as file:
            text = _Text(path, file)
            while not text.eof:
                text.read(CHUNK_BYTES)
    except SpecError as found:
        return found
    return SpecError(f"{path} is not UTF-8")


def json_lines(path: Path) -> Iterator[tuple[int, JSONValue]]:
    """The JSON value of every non-blank line of a JSON-lines file, with its line number."""
    for number, text in text_lines(path):
        if not text.strip():
            continue
        yield number, json_line(text, line_place(path, number))


def json_line(text: str, where: str) -> JSONValue:
    """One line's JSON value, its depth bounded; SpecError naming ``where`` (``FILE line N``) otherwise."""
    try:
        value = json.loads(text.rstrip("\r\n"))
    except json.JSONDecodeError as exc:
        raise problem(where, None, f"not JSON ({exc.msg}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise too_deep(where) from exc
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # only then can it nest too deeply: walk it
        check_depth(value, where)
    return value


def too_deep(where: str, field: str | None = None) -> SpecError:
    """The error of a JSON value that nests deeper than :data:`MAX_JSON_DEPTH` (in ``field``, where known)."""
    return problem(where, field, f"JSON nested deeper than {MAX_JSON_DEPTH} levels; a record of a data file is flatter")


def check_depth(value: JSONValue, where: str, most: int = MAX_JSON_DEPTH) -> None:
    """Raise :func:`too_deep` (naming the record's field) when lists and objects nest deeper than ``most`` in
    ``value``; iteratively (no recursion limit), following containers only."""
    if not isinstance(value, list | dict):
        return
    top = value.items() if isinstance(value, dict) else ((f"[{i}]", v) for i, v in enumerate(value))
    stack = [(child, 2, str(name)) for name, child in top if isinstance(child, list | dict)]
    while stack:
        item, level, field = stack.pop()
        if level > most:
            raise too_deep(where, field)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, level + 1, field) for child in children if isinstance(child, list | dict))


def csv_rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, tuple[str, ...]]]:
    """The values of ``columns`` (in that order) of every row of a CSV file with a header row,
    with the line the row starts on. Blank lines are skipped; a column the header lacks, a row
    with more or fewer fields than the header, or a CSV syntax error fails with its line."""
    csv.field_size_limit(max(csv.field_size_limit(), MAX_RECORD_BYTES))
    reader = csv.reader((text for _, text in text_lines(path)), strict=True)
    start = 1
    try:
        header = [name.strip() for name in next(reader, None) or ()]
        if not header:
            raise SpecError(f"{path} has no header row (line 1 is blank)")
        missing = [name for name in columns if name not in header]
        if missing:
            raise problem(line_place(path, 1), missing[0], no_column(header, missing[0], columns))
        pick = _picker([header.index(name) for name in columns])
        width = len(header)
        start = reader.line_num + 1
        for row in reader:
            if len(row) != width and row:
                raise problem(line_place(path, start), None, f"{len(row)} fields, the header has {width}")
            if row:
                yield start, pick(row)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise problem(line_place(path, start), None, f"not CSV ({exc})") from exc


def no_column(header: Sequence[str], name: str, columns: Sequence[str]) -> str:
    """Why a CSV header lacks ``name``, never quoting the header: any text file's first line is taken for one
    (a trace field given /etc/passwd would echo its first line), so only its size and a near miss are said."""
    near = next((h for h in header if h.strip().lower() == name.lower()), None)
    hint = f"; {shown(near)} differs in case" if near is not None else ""
    fields = f"{len(header)} field" + ("" if len(header) == 1 else "s")
    return f"no such column (the header, {fields}, does not name it{hint}; the columns read: {', '.join(columns)})"


def _picker(indices: list[int]) -> Callable[[list[str]], tuple[str, ...]]:
    if len(indices) == 1:
        only = indices[0]
        return lambda row: (row[only],)
    return itemgetter(*indices)


def content_hash(path: Path | str) -> str:
    """The sha256 (hex) of a file's bytes, read 256 KiB at a time; of a folder, over its files'
    relative paths and hashes in sorted order (a saved dataset is a folder)."""
    root = Path(path).expanduser()
    if root.is_dir():
        digest = hashlib.sha256()
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            digest.update(f"{file.relative_to(root).as_posix()}\0{content_hash(file)}\n".encode())
        return digest.hexdigest()
    digest = hashlib.sha256()
    with root.open("rb") as file:
        while block := file.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def first_character(path: Path) -> str:
    """The first character of a text file that is not whitespace (``""`` when there is none in
    its first 256 KiB), to tell a JSON array from JSON lines."""
    with path.open("rb") as file:
        head = file.read(CHUNK_BYTES)
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff").lstrip(_WHITESPACE)
    return text[:1]


class _Text:
    """A UTF-8 file decoded chunk by chunk; a byte that is not UTF-8 fails with its line."""

    def __init__(self, path: Path, file: BinaryIO) -> None:
        self.path = path
        self._file = file
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._newlines = 0
        self._first = True
        self.eof = False

    def read(self, size: int) -> str:
        data = self._file.read(size)
        self.eof = not data
        pending = self._decoder.getstate()[0]
        try:
            text = self._decoder.decode(data, final=self.eof)
        except UnicodeDecodeError as exc:
            line = self._newlines + 1 + (pending + data).count(b"\n", 0, exc.start)
            raise SpecError(f"{self.path} line {line} is not UTF-8") from exc
        self._newlines += text.count("\n")
        if self._first and text:
            text, self._first = text.removeprefix("\ufeff"), False
        return text


class _ArrayCursor:
    """The state of :func:`json_elements`: a text buffer, a position in it, and that position's line."""

    def __init__(self, text: _Text) -> None:
        self.text = text
        self.buf = ""
        self.pos = 0
        self.line = 1

    def advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def more(self, at_least: int = 0) -> bool:
        """Read more text into the buffer (dropping what was consumed); False at the end of the file."""
        if self.pos:
            self.buf, self.pos = self.buf[self.pos :], 0
        if self.text.eof:
            return False
        text = self.text.read(max(at_least, CHUNK_BYTES))
        self.buf += text
        return bool(text)

    def skip_space(self) -> str:
        """The next character that is not whitespace (``""`` at the end of the file), not consumed."""
        while True:
            self.advance(_SPACE.match(self.buf, self.pos).end())
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def here(self) -> str:
        return line_place(self.text.path, self.line)

    def element(self) -> JSONValue:
        """Decode the JSON value at the cursor, reading more while it is cut by the buffer's end."""
        last: tuple[str, int] | None = None
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError as exc:
                raise too_deep(self.here()) from exc
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_RECORD_BYTES:
                    raise problem(self.here(), None, f"a JSON value longer than {_MIB} MiB, or not JSON") from exc
                if self._settled(exc, last):
                    line = self.line + self.buf.count("\n", self.pos, exc.pos)
                    what = "the file ends inside the array" if exc.pos >= len(self.buf) else exc.msg
                    raise problem(line_place(self.text.path, line), None, f"not JSON ({what})") from exc
                last = (exc.msg, exc.pos - self.pos)
                self.more(len(self.buf) - self.pos)
                continue
            if end == len(self.buf) and not self.text.eof:
                self.more(len(self.buf) - self.pos)  # a number or literal may go on in the next chunk
                continue
            if self.buf.count("[", self.pos, end) + self.buf.count("{", self.pos, end) > MAX_JSON_DEPTH:
                check_depth(value, self.here())
            self.advance(end)
            return value

    def _settled(self, exc: json.JSONDecodeError, last: tuple[str, int] | None) -> bool:
        """Whether a decode error is the file's, not the buffer's end: the end of the file, or the
        same error at the same place after reading more (an unterminated string may end later)."""
        if self.text.eof:
            return True
        same = last == (exc.msg, exc.pos - self.pos)
        return same and not exc.msg.startswith("Unterminated string") and exc.pos < len(self.buf) - 1


def json_elements(path: Path) -> Iterator[tuple[int, JSONValue]]:
    """Every element of the JSON array a file holds, with the line it starts on, decoded one at
    a time so that only the current element (and a buffer of a few hundred KiB) is in memory."""
    with path.open("rb") as file:
        cursor = _ArrayCursor(_Text(path, file))
        if cursor.skip_space() != "[":
            raise problem(cursor.here(), None, "not a JSON array (it must start with '[')")
        cursor.advance(cursor.pos + 1)
        first = True
        while True:
            char = cursor.skip_space()
            if char == "]":
                cursor.advance(cursor.pos + 1)
                break
            if not first:
                if char != ",":
                    found = repr(char) if char else "the end of the file"
                    raise problem(
                        cursor.here(), None, f"not JSON (expected ',' or ']' between elements, found {found})"
                    )
                cursor.advance(cursor.pos + 1)
                cursor.skip_space()
            line = cursor.line
            yield line, cursor.element()
            first = False
        if cursor.skip_space():
            raise problem(cursor.here(), None, "not JSON (text after the array's closing ']')")
