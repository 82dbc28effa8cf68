"""The records of a dataset source, one at a time, each with the place it came from.

A source is a local file (``.json`` holding an array or JSON lines, ``.jsonl``/``.ndjson``,
``.csv`` with a header row, ``.parquet``), a local folder (a dataset saved with
``save_to_disk``, or a folder of such files read in sorted order), or ``hf:ID[:SPLIT]`` (a
Hugging Face dataset, see :mod:`engine.data.hub`). A record is a dict; its place is
``FILE line N`` for text files (the line the record starts on) and ``SOURCE row N`` (from 1)
for parquet files and Hugging Face datasets. ``columns`` names the fields the caller needs:
sources with a schema (CSV header, parquet schema, dataset features) are checked against it
before the first record and read only those columns; JSON records are returned whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from pathlib import Path
from typing import Protocol

from engine.data import hub
from engine.data.reading import (
    csv_rows,
    existing_file,
    first_character,
    first_line,
    json_elements,
    json_lines,
    kind_of,
    listing,
    problem,
)
from engine.jsonvalue import JSONValue
from engine.spec import SpecError

# A record's place and its fields: JSON values from JSON files, text from CSV, the values pyarrow or
# the datasets library give for parquet files and Hugging Face datasets.
Record = tuple[str, Mapping[str, object]]
FILE_KINDS = (".json", ".jsonl", ".ndjson", ".csv", ".parquet")
_PARQUET_BATCH = 1024


class _RecordBatch(Protocol):
    """What is read of a batch of a parquet file's rows (a ``pyarrow.RecordBatch``)."""

    def to_pylist(self) -> list[dict[str, object]]: ...


class _ParquetFile(Protocol):
    """What is read of an open parquet file (a ``pyarrow.parquet.ParquetFile``)."""

    def iter_batches(self, batch_size: int, columns: list[str]) -> Iterable[_RecordBatch]: ...


def records(source: str, columns: tuple[str, ...]) -> Iterator[Record]:
    """Every record of ``source`` with its place; the source is checked before this returns
    (a missing file, an empty one, an unknown kind of file, an unknown column where there is
    a schema), so that the first problem comes before any work is done."""
    if source.startswith(hub.PREFIX):
        return hub.rows(source, columns)
    path = Path(source).expanduser()
    if not path.exists():
        raise SpecError(f"dataset {path} does not exist (a Hugging Face dataset is named hf:ID or hf:ID:SPLIT)")
    if path.is_dir():
        if hub.is_saved_dataset(path):
            return hub.rows(str(path), columns)
        return _folder_records(path, columns)
    return file_records(existing_file(path, "dataset"), columns)


def file_records(path: Path, columns: tuple[str, ...]) -> Iterator[Record]:
    """The records of one local file, by its kind: ``.csv``, ``.parquet``, ``.jsonl``/``.ndjson``
    (JSON lines); a ``.json`` file (or one of unknown suffix) is a JSON array when its first
    character is ``[`` and JSON lines when it is ``{``."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _csv_records(path, columns)
    if suffix == ".parquet":
        return _parquet_records(path, columns)
    first = first_character(path)
    if suffix in (".json", ".jsonl", ".ndjson") or first in ("[", "{"):
        if not first:
            raise SpecError(f"dataset {path} holds only whitespace")
        array = first == "[" and suffix not in (".jsonl", ".ndjson")
        values = json_elements(path) if array else json_lines(path)
        return _objects(path, values)
    raise SpecError(
        f"dataset {path}: unknown kind of file {suffix or '(no suffix)'!r}; a dataset is a "
        f"{', '.join(FILE_KINDS)} file, a folder of them, a saved dataset folder or hf:ID[:SPLIT]"
    )


def _objects(path: Path, values: Iterator[tuple[int, JSONValue]]) -> Iterator[Record]:
    for line, value in values:
        where = f"{path} line {line}"
        if not isinstance(value, dict):
            raise problem(where, None, f"a record must be a JSON object, not {kind_of(value)}")
        yield where, value


def _csv_records(path: Path, columns: tuple[str, ...]) -> Iterator[Record]:
    rows = csv_rows(path, columns)
    first = next(rows, None)  # checks the header now, not at the first next() of the caller
    return _csv_dicts(path, columns, () if first is None else (first,), rows)


_CsvRow = tuple[int, tuple[str, ...]]  # a CSV row's line and its columns' values (engine.data.reading.csv_rows)


def _csv_dicts(
    path: Path, columns: tuple[str, ...], first: tuple[_CsvRow, ...], rows: Iterator[_CsvRow]
) -> Iterator[Record]:
    for line, values in chain(first, rows):
        yield f"{path} line {line}", dict(zip(columns, values, strict=True))


def _parquet_records(path: Path, columns: tuple[str, ...]) -> Iterator[Record]:
    try:
        import pyarrow.parquet as pq

        table = pq.ParquetFile(path)
    except ImportError as exc:
        raise SpecError(f"dataset {path}: reading parquet needs the pyarrow package") from exc
    except Exception as exc:  # pyarrow raises its own ArrowInvalid, OSError ...: one line either way
        raise SpecError(f"dataset {path} is not a parquet file ({first_line(exc)})") from exc
    names = table.schema_arrow.names
    missing = [name for name in columns if name not in names]
    if missing:
        raise problem(str(path), missing[0], f"no such column (the file has {listing(names)})")
    return _parquet_rows(path, table, columns)


def _parquet_rows(path: Path, table: _ParquetFile, columns: tuple[str, ...]) -> Iterator[Record]:
    number = 0
    for batch in table.iter_batches(batch_size=_PARQUET_BATCH, columns=list(columns)):
        for row in batch.to_pylist():
            number += 1
            yield f"{path} row {number}", row


def _folder_records(folder: Path, columns: tuple[str, ...]) -> Iterator[Record]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in FILE_KINDS)
    if not files:
        raise SpecError(f"dataset folder {folder} holds no {', '.join(FILE_KINDS)} file and is not a saved dataset")
    first = file_records(files[0], columns)
    return _chained(first, files[1:], columns)


def _chained(first: Iterator[Record], rest: list[Path], columns: tuple[str, ...]) -> Iterator[Record]:
    yield from first
    for path in rest:
        yield from file_records(existing_file(path, "dataset"), columns)
