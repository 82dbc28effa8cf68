"""Prompt files read streamed and bounded: lines or JSON lines, one-line errors naming file, line and field."""

from __future__ import annotations

import json

import pytest

from engine.data import prompts
from engine.data.reading import MAX_JSON_DEPTH
from engine.spec import SpecError


def test_lines_and_json_lines_in_order(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text('first prompt\n\n  \n{"prompt": "from json"}\r\n{"text": "from text", "prompt": ""}\nlast\n')
    assert prompts.read_prompts(path) == ["first prompt", "from json", "from text", "last"]
    assert prompts.read_prompts(path, most=2) == ["first prompt", "from json"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('ok\n{"prompt": "a"\n', r"p.txt line 2: not JSON \(Expecting ',' delimiter, column 15\)$"),
        ('{"id": 3}\n', r"p.txt line 1: field 'prompt': missing \(a JSON line needs a 'prompt' or 'text' string\)$"),
        ('{"prompt": ["a", "b"]}\n', r"p.txt line 1: field 'prompt': must be text, not a list$"),
        ('{"a": ' + "[" * 100_000 + "\n", r"p.txt line 1: JSON nested deeper than 64 levels"),
        ('{"prompt": "x", "meta": ' + "[" * 70 + "]" * 70 + "}\n", r"p.txt line 1: field 'meta': JSON nested deeper"),
        ("\n \n", r"prompt file .*p.txt holds no prompts$"),
    ],
)
def test_bad_prompt_files_fail_in_one_line_naming_line_and_field(tmp_path, content, expected):
    path = tmp_path / "p.txt"
    path.write_text(content)
    with pytest.raises(SpecError, match=expected) as err:
        prompts.read_prompts(path)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_no_error_quotes_a_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": {"secret": "zorro"}}) + "\n")
    with pytest.raises(SpecError) as err:
        prompts.read_prompts(path)
    assert "zorro" not in str(err.value) and "must be text, not an object" in str(err.value)


def test_size_and_kind_of_file(tmp_path, monkeypatch):
    path = tmp_path / "big.txt"
    path.write_text("a prompt\n" * 10)
    monkeypatch.setattr(prompts, "MAX_PROMPT_FILE_BYTES", 50)
    with pytest.raises(SpecError, match=r"big.txt is 0 MiB; at most 0 MiB \(a larger corpus is a dataset"):
        prompts.read_prompts(path)
    with pytest.raises(SpecError, match="is a folder, not a file"):
        prompts.read_prompts(tmp_path)
    with pytest.raises(SpecError, match="does not exist"):
        prompts.read_prompts(tmp_path / "missing.txt")
    (tmp_path / "latin.txt").write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(SpecError, match=r"latin.txt line 2 is not UTF-8$"):
        prompts.read_prompts(tmp_path / "latin.txt")


def test_datasets_refuse_deep_json_in_one_line(tmp_path):
    """100,000 '[' in a dataset (an array, or a JSON line) is refused with its line, not a RecursionError."""
    from engine.data.conversations import check_dataset, read_conversations

    (tmp_path / "a.json").write_text("[" * 100_000)
    (tmp_path / "b.jsonl").write_text('{"conversations": ' + "[" * 100_000 + "\n")
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    (tmp_path / "c.json").write_text(f'[{{"conversations": []}}, {{"conversations": {nested}}}]')
    for name, where in (("a.json", "a.json line 1: JSON"), ("b.jsonl", "b.jsonl line 1: JSON")):
        with pytest.raises(SpecError, match=f"{where} nested deeper than {MAX_JSON_DEPTH} levels"):
            check_dataset(str(tmp_path / name), "sharegpt")
    with pytest.raises(SpecError, match=r"c.json line 1: field 'conversations': JSON nested deeper than 64 levels"):
        list(read_conversations(str(tmp_path / "c.json"), "sharegpt"))
