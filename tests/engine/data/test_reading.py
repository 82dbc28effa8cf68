"""The streamed reading shared by datasets and traces: numbered UTF-8 lines, JSON arrays element
by element (across any buffer boundary), CSV rows with their lines, content hashes, and errors
that name the file, the line and the field."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from engine.data import reading
from engine.spec import SpecError


def _elements(path: Path) -> list[tuple[int, object]]:
    return list(reading.json_elements(path))


def test_text_lines_are_numbered_and_checked_as_utf8_one_by_one(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("\ufeffpremière\r\nsecond\n\nlast".encode())
    assert list(reading.text_lines(path)) == [(1, "première\r\n"), (2, "second\n"), (3, "\n"), (4, "last")]
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\nnever read\n")
    with pytest.raises(SpecError, match=r"a.txt line 3 is not UTF-8$"):
        list(reading.text_lines(path))


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64, 1 << 20])
@pytest.mark.parametrize("indent", [None, 2])
def test_json_array_elements_survive_every_buffer_boundary(tmp_path, monkeypatch, chunk, indent):
    monkeypatch.setattr(reading, "CHUNK_BYTES", chunk)
    rng = random.Random(7)
    data = [
        {
            "id": i,
            "text": "héllo wörld ✓ " * rng.randint(0, 9),
            "big": 12345678901234567890 * i,
            "f": -1.5e-7,
            "ok": True,
        }
        for i in range(40)
    ] + [123456, "tail", None, [1, [2, {}]]]
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    path = tmp_path / "a.json"
    path.write_text(text)
    got = _elements(path)
    assert [value for _, value in got] == data
    lines = text.split("\n")
    if indent:  # each element's line is the line it starts on
        assert all(lines[line - 1].strip().startswith(("{", "1", '"', "n", "[")) for line, _ in got)
        assert [line for line, _ in got][:2] == [2, 9]
    else:
        assert {line for line, _ in got} == {1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"a": 1},\n {"a": 2,}]', r"line 2: not JSON \(Expecting property name"),
        ('[{"a": 1}\n {"a": 2}]', r"line 2: not JSON \(expected ',' or '\]' between elements, found '\{'\)"),
        ('[{"a": 1},\n', r"line 2: not JSON \(the file ends inside the array\)"),
        ('{"a": 1}', r"line 1: not a JSON array"),
        ("[1, 2]\nmore", r"line 2: not JSON \(text after the array's closing '\]'\)"),
        ('[\n{"a": "no end}]', r"line 2: not JSON \(Unterminated string"),
    ],
)
@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_a_malformed_json_array_fails_with_its_line(tmp_path, monkeypatch, text, message, chunk):
    monkeypatch.setattr(reading, "CHUNK_BYTES", chunk)
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SpecError, match=r"bad.json " + message):
        _elements(path)


def test_a_syntax_error_mid_file_fails_without_reading_to_the_end(tmp_path, monkeypatch):
    """A broken element followed by megabytes of good ones fails at once, with its own line."""
    monkeypatch.setattr(reading, "CHUNK_BYTES", 4096)
    path = tmp_path / "mid.json"
    good = ",\n".join(json.dumps({"i": i, "pad": "x" * 100}) for i in range(20_000))
    path.write_text('[{"i": 0},\n{"i": 1 "oops": 2},\n' + good + "]")
    reads = []
    original = reading._Text.read
    monkeypatch.setattr(reading._Text, "read", lambda self, size: reads.append(size) or original(self, size))
    with pytest.raises(SpecError, match=r"mid.json line 2: not JSON \(Expecting ',' delimiter\)"):
        _elements(path)
    assert sum(reads) < 64 * 4096  # not the file's 2 MB


def test_a_byte_that_is_not_utf8_in_a_json_array_names_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "CHUNK_BYTES", 4)
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[\n"ok",\n"caf' + b"\xe9" + b'"\n]')
    with pytest.raises(SpecError, match=r"latin1.json line 3 is not UTF-8$"):
        _elements(path)


def test_json_lines_skip_blank_lines_and_name_a_bad_one(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n  \n{"a": 2}\r\n{"a": \n')
    values = reading.json_lines(path)
    assert next(values) == (1, {"a": 1}) and next(values) == (4, {"a": 2})
    with pytest.raises(SpecError, match=r"a.jsonl line 5: not JSON \(Expecting value, column 7\)"):
        next(values)


def test_csv_rows_give_the_line_each_row_starts_on(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text('id, text ,n\n1,plain,5\n\n2,"two\nlines",6\n3,"a ""quoted"" comma, here",7\n')
    assert list(reading.csv_rows(path, ("n", "text"))) == [
        (2, ("5", "plain")),
        (4, ("6", "two\nlines")),
        (6, ("7", 'a "quoted" comma, here')),
    ]


def test_csv_errors_name_the_line_and_column(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("a,b\n1,2\n3\n")
    with pytest.raises(
        SpecError, match=r"a.csv line 1: field 'c': no such column \(the header, 2 fields, does not name"
    ):
        list(reading.csv_rows(path, ("a", "c")))
    with pytest.raises(
        SpecError, match=r"field 'A': no such column \(.*'a' differs in case; the columns read: A, b\)$"
    ):
        list(reading.csv_rows(path, ("A", "b")))
    with pytest.raises(SpecError, match=r"a.csv line 3: 1 fields, the header has 2$"):
        list(reading.csv_rows(path, ("a",)))
    path.write_text('a,b\n1,"never closed\n')
    with pytest.raises(SpecError, match=r"a.csv line 2: not CSV"):
        list(reading.csv_rows(path, ("a",)))


def test_content_hash_of_a_file_and_of_a_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "CHUNK_BYTES", 7)
    path = tmp_path / "data" / "a.bin"
    path.parent.mkdir()
    payload = bytes(range(256)) * 100
    path.write_bytes(payload)
    assert reading.content_hash(path) == hashlib.sha256(payload).hexdigest()
    before = reading.content_hash(path.parent)
    (path.parent / "b.bin").write_bytes(b"x")
    assert reading.content_hash(path.parent) != before
    (path.parent / "b.bin").rename(path.parent / "c.bin")
    assert reading.content_hash(path.parent) not in (before, "")  # names count, not just bytes


def test_errors_quote_only_a_short_prefix_of_a_value():
    assert reading.shown("x" * 500) == repr("x" * 40 + "...")
    assert reading.shown([1] * 100).endswith("...") and len(reading.shown([1] * 100)) == 43
    assert str(reading.problem("f.jsonl line 3", "input_length", "-1 is negative")) == (
        "f.jsonl line 3: field 'input_length': -1 is negative"
    )
    assert reading.listing([str(i) for i in range(20)], most=3) == "'0', '1', '2' and 17 more"


def test_existing_file_says_what_is_wrong(tmp_path):
    with pytest.raises(SpecError, match=r"trace .*nope.csv does not exist"):
        reading.existing_file(tmp_path / "nope.csv", "trace")
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(SpecError, match=r"trace .*empty.csv is empty"):
        reading.existing_file(tmp_path / "empty.csv", "trace")
    with pytest.raises(SpecError, match=r"is not a file"):
        reading.existing_file(tmp_path, "trace")


def test_no_message_quotes_a_line_or_a_header_of_the_file(tmp_path):
    """Any file given as a CSV trace or dataset (here a passwd-like one) is refused without echoing its lines."""
    from engine.data.traces import read_trace

    secret = "zorro:x:0:0:zorro:/zorro:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n"
    path = tmp_path / "passwd"
    path.write_text(secret)
    for fmt in ("azure", "burstgpt", "mooncake"):
        with pytest.raises(SpecError) as err:
            read_trace(path, fmt)
        message = str(err.value)
        assert "zorro" not in message and "alice" not in message and "\n" not in message, message
    with pytest.raises(SpecError) as err:
        list(reading.csv_rows(path, ("prompt",)))
    assert "zorro" not in str(err.value) and "header, 1 field," in str(err.value)
    (tmp_path / "rows.jsonl").write_text('["zorro:x:0:0:zorro"]\n')
    with pytest.raises(SpecError, match=r"rows.jsonl line 1: a row must be a JSON object, not a list$"):
        read_trace(tmp_path / "rows.jsonl", "mooncake")
