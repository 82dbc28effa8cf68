"""Datasets in their published formats (ShareGPT, OpenAI chat, a text column) read into plain
conversations, from local files, folders and saved Hugging Face datasets; the helpers the
request sources use; and one clear line for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.data.conversations import (
    Conversation,
    Message,
    Turn,
    check_dataset,
    first_reply,
    first_request,
    read_conversations,
    system_messages,
    turns,
    user_turns,
)
from engine.spec import SpecError

SYSTEM = "You are a helpful assistant who answers briefly."
SHAREGPT = [
    {
        "id": "QWJhYvA_0",
        "conversations": [
            {"from": "system", "value": SYSTEM},
            {"from": "human", "value": "Summarize the plot of Hamlet in two sentences."},
            {"from": "gpt", "value": "Prince Hamlet seeks revenge on his uncle Claudius. Nearly everyone dies."},
            {"from": "human", "value": "Who is Ophelia?"},
            {"from": "gpt", "value": "Polonius's daughter, whom Hamlet courts; she drowns."},
        ],
    },
    {"id": "i6IyJda_0", "conversations": []},  # real ShareGPT dumps hold empty conversations
    {
        "id": "A5AbcES_0",
        "conversations": [
            {"from": "gpt", "value": "Hello! How can I help?"},
            {"from": "user", "value": "Write a haiku about rain"},
            {"from": "chatgpt", "value": "Soft rain on the roof"},
            {"from": "bing", "value": "(continued)"},
            {"from": "Human", "value": "  "},
            {"from": "human", "value": None},
        ],
    },
]


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _jsonl(path: Path, rows: list) -> str:
    return _write(path, "".join(json.dumps(row) + "\n" for row in rows))


def test_sharegpt_json_array_with_system_human_and_gpt_turns(tmp_path):
    source = _write(tmp_path / "sharegpt.json", json.dumps(SHAREGPT, indent=2))
    conversations = read_conversations(source, "sharegpt")
    hamlet, haiku = list(conversations)
    assert conversations.read == 3 and conversations.skipped == {"no user turn": 1}
    assert hamlet.where == f"{source} line 2" and haiku.where.startswith(f"{source} line ")
    assert [m.role for m in hamlet.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert first_request(hamlet) == (
        Message("system", SYSTEM),
        Message("user", SHAREGPT[0]["conversations"][1]["value"]),
    )
    assert first_reply(hamlet).startswith("Prince Hamlet")
    assert user_turns(hamlet) == ("Summarize the plot of Hamlet in two sentences.", "Who is Ophelia?")
    assert turns(hamlet)[1] == Turn("Who is Ophelia?", "Polonius's daughter, whom Hamlet courts; she drowns.")
    # the greeting before the first user turn is no reply; consecutive replies are joined; blank turns dropped
    assert first_request(haiku) == (Message("user", "Write a haiku about rain"),)
    assert turns(haiku) == (Turn("Write a haiku about rain", "Soft rain on the roof\n\n(continued)"),)
    assert system_messages(haiku) == ()


def test_sharegpt_as_json_lines_reads_the_same(tmp_path):
    array = list(read_conversations(_write(tmp_path / "a.json", json.dumps(SHAREGPT)), "sharegpt"))
    lines = list(read_conversations(_jsonl(tmp_path / "a.jsonl", SHAREGPT), "sharegpt"))
    assert [c.messages for c in array] == [c.messages for c in lines]
    assert [c.where.rsplit(" ", 1)[1] for c in lines] == ["1", "3"]
    as_json_suffix = list(read_conversations(_jsonl(tmp_path / "lines.json", SHAREGPT), "sharegpt"))
    assert [c.messages for c in as_json_suffix] == [c.messages for c in array]


def test_openai_chat_jsonl_with_text_parts_and_developer_role(tmp_path):
    rows = [
        {
            "messages": [
                {"role": "developer", "content": SYSTEM},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]},
            ]
        },
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Two."}]},
                {"role": "assistant", "content": "Both parts read."},
            ]
        },
    ]
    first, second = read_conversations(_jsonl(tmp_path / "chat.jsonl", rows), "openai-chat")
    assert first_request(first) == (Message("system", SYSTEM), Message("user", "Hi")) and first_reply(first) is None
    assert first_request(second) == (Message("user", "Part one.\nTwo."),)
    assert first_reply(second) == "Both parts read."


def test_a_text_column_of_jsonl_csv_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    prompts = ["What is a KV cache?", "Explain, briefly, tensor parallelism.", 'A "quoted"\nprompt']
    jsonl = _jsonl(tmp_path / "p.jsonl", [{"prompt": p, "id": i} for i, p in enumerate(prompts)])
    csv_path = tmp_path / "p.csv"
    import csv

    with csv_path.open("w", newline="") as f:
        csv.writer(f).writerows([["id", "prompt"], *[[i, p] for i, p in enumerate(prompts)]])
    pq.write_table(pa.table({"id": [0, 1, 2], "prompt": prompts}), tmp_path / "p.parquet", row_group_size=2)
    for source in (jsonl, str(csv_path), str(tmp_path / "p.parquet")):
        got = list(read_conversations(source, "text", column="prompt"))
        assert [c.messages for c in got] == [(Message("user", p),) for p in prompts], source
    assert [c.where for c in read_conversations(str(csv_path), "text", "prompt")][2] == f"{csv_path} line 4"
    assert list(read_conversations(str(tmp_path / "p.parquet"), "text", "prompt"))[2].where.endswith("p.parquet row 3")


def test_a_folder_of_files_is_read_in_sorted_order(tmp_path):
    (tmp_path / "data").mkdir()
    _jsonl(tmp_path / "data" / "b.jsonl", [{"text": "second"}])
    _jsonl(tmp_path / "data" / "a.jsonl", [{"text": "first"}])
    (tmp_path / "data" / "README.md").write_text("not data")
    got = read_conversations(str(tmp_path / "data"), "text", "text")
    assert [c.messages[0].content for c in got] == ["first", "second"]


def test_a_saved_hugging_face_dataset_is_read_back(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [{"id": r["id"], "conversations": r["conversations"]} for r in SHAREGPT]
    dataset = datasets.Dataset.from_list(rows)
    dataset.save_to_disk(str(tmp_path / "saved"))
    got = list(read_conversations(str(tmp_path / "saved"), "sharegpt"))
    assert [c.where for c in got] == [f"{tmp_path / 'saved'} row 1", f"{tmp_path / 'saved'} row 3"]
    assert first_request(got[0])[0] == Message("system", SYSTEM)
    splits = datasets.DatasetDict({"train": dataset, "test": dataset.select([2])})
    splits.save_to_disk(str(tmp_path / "dict"))
    assert len(list(read_conversations(f"hf:{tmp_path / 'dict'}", "sharegpt"))) == 2  # train by default
    test = list(read_conversations(f"hf:{tmp_path / 'dict'}:test", "sharegpt"))
    assert [user_turns(c) for c in test] == [("Write a haiku about rain",)]
    with pytest.raises(SpecError, match=r"name one of its splits as hf:FOLDER:SPLIT \('train', 'test'\)"):
        read_conversations(f"hf:{tmp_path / 'dict'}:validation", "sharegpt")
    with pytest.raises(SpecError, match=r"field 'prompt': no such column \(the dataset has 'id', 'conversations'\)"):
        read_conversations(str(tmp_path / "saved"), "text", "prompt")


def test_reading_is_lazy_and_a_conversation_is_plain_data(tmp_path):
    source = _jsonl(tmp_path / "a.jsonl", [{"text": "one"}, {"text": 5}])
    conversations = read_conversations(source, "text", "text")
    first = next(conversations)
    assert first == Conversation((Message("user", "one"),), f"{source} line 1")
    with pytest.raises(SpecError, match=r"a.jsonl line 2: field 'text': must be text, not 5$"):
        next(conversations)


def test_check_dataset_is_quick_and_fails_in_one_line(tmp_path):
    source = _write(tmp_path / "big.json", json.dumps(SHAREGPT * 2000))
    check_dataset(source, "sharegpt")
    with pytest.raises(
        SpecError, match=r"dataset .*missing.json does not exist \(a Hugging Face dataset is named hf:ID"
    ):
        check_dataset(str(tmp_path / "missing.json"), "sharegpt")
    with pytest.raises(
        SpecError, match=r"big.json line 1: field 'messages': missing \(the record has 'id', 'conversations'\)"
    ):
        check_dataset(source, "openai-chat")
    csv_path = _write(tmp_path / "p.csv", "id,prompt\n1,hi\n")
    with pytest.raises(
        SpecError, match=r"p.csv line 1: field 'text': no such column \(the header, 2 fields, does not name it; the"
    ):
        check_dataset(csv_path, "text", "text")
    check_dataset(csv_path, "text", "prompt")


def test_an_hf_id_that_cannot_be_fetched_fails_in_pre_flight(monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SpecError, match=r"^hf:nobody/no-such-dataset:train cannot be fetched: HF_HUB_OFFLINE=1 is set"):
        check_dataset("hf:nobody/no-such-dataset:train", "sharegpt")
    with pytest.raises(SpecError, match=r"name a Hugging Face dataset as hf:ID"):
        check_dataset("hf:", "sharegpt")


# --- bad input: one line naming the file, the line or row, and the field ---


def test_bad_input_malformed_row(tmp_path):
    source = _write(tmp_path / "a.jsonl", '{"text": "ok"}\n{"text": "no end}\n')
    with pytest.raises(SpecError, match=r"a.jsonl line 2: not JSON \(Unterminated string"):
        list(read_conversations(source, "text", "text"))
    bad_turn = [{"conversations": [{"from": "human", "value": "hi"}, {"value": "no role"}]}]
    with pytest.raises(SpecError, match=r"b.json line 1: field 'conversations\[1\].from': missing"):
        list(read_conversations(_write(tmp_path / "b.json", json.dumps(bad_turn)), "sharegpt"))
    wrong_role = [{"messages": [{"role": "tool", "content": "42"}]}]
    with pytest.raises(SpecError, match=r"field 'messages\[0\].role': 'tool' is not one of system, developer"):
        list(read_conversations(_jsonl(tmp_path / "c.jsonl", wrong_role), "openai-chat"))
    with pytest.raises(SpecError, match=r"d.jsonl line 1: a record must be a JSON object, not a list"):
        list(read_conversations(_jsonl(tmp_path / "d.jsonl", [[1, 2]]), "text", "text"))


def test_bad_input_empty_file(tmp_path):
    with pytest.raises(SpecError, match=r"dataset .*empty.json is empty$"):
        read_conversations(_write(tmp_path / "empty.json", ""), "sharegpt")
    with pytest.raises(SpecError, match=r"dataset .*blank.jsonl holds only whitespace$"):
        read_conversations(_write(tmp_path / "blank.jsonl", "\n \n"), "sharegpt")
    with pytest.raises(SpecError, match=r"dataset .*none.json holds no records$"):
        list(read_conversations(_write(tmp_path / "none.json", "[]"), "sharegpt"))


def test_bad_input_unknown_column(tmp_path):
    source = _jsonl(tmp_path / "a.jsonl", [{"prompt": "hi"}])
    with pytest.raises(SpecError, match=r"a.jsonl line 1: field 'text': missing \(the record has 'prompt'\)"):
        list(read_conversations(source, "text", "text"))
    with pytest.raises(SpecError, match=r"format 'text' needs a column"):
        read_conversations(source, "text")
    with pytest.raises(SpecError, match=r"dataset format 'alpaca' is not one of sharegpt, openai-chat, text"):
        read_conversations(source, "alpaca")


def test_bad_input_not_utf8(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(SpecError, match=r"latin1.jsonl line 2 is not UTF-8$"):
        list(read_conversations(str(path), "text", "text"))


def test_bad_input_a_dataset_with_no_user_turn(tmp_path):
    only_replies = [{"conversations": [{"from": "gpt", "value": "Hello!"}]}, {"conversations": []}]
    source = _write(tmp_path / "replies.json", json.dumps(only_replies))
    with pytest.raises(
        SpecError, match=r"replies.json: field 'conversations': no conversation has a user turn \(2 records"
    ):
        list(read_conversations(source, "sharegpt"))


def test_bad_input_an_unknown_kind_of_file(tmp_path):
    with pytest.raises(SpecError, match=r"unknown kind of file '.txt'"):
        read_conversations(_write(tmp_path / "a.txt", "just a prompt\n"), "text", "text")
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(SpecError, match=r"holds no .json, .jsonl, .ndjson, .csv, .parquet file"):
        read_conversations(str(tmp_path / "empty_dir"), "text", "text")
    (tmp_path / "x.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(SpecError, match=r"x.parquet is not a parquet file"):
        read_conversations(str(tmp_path / "x.parquet"), "text", "text")


def test_a_hub_dataset_is_streamed_and_checked_without_the_network(monkeypatch):
    """The Hub's side is stubbed: the pre-flight asks for the dataset's info, then reads a
    streamed first row; no network means one line saying so."""
    datasets = pytest.importorskip("datasets")
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    calls = []

    def load_dataset(name, split, streaming):
        calls.append((name, split, streaming))
        return datasets.Dataset.from_list([{"prompt": "Hello there", "id": 1}])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, name, timeout: object())
    check_dataset("hf:someone/prompts", "text", "prompt")
    got = list(read_conversations("hf:someone/prompts:test", "text", "prompt"))
    assert got == [Conversation((Message("user", "Hello there"),), "hf:someone/prompts:test row 1")]
    assert calls == [("someone/prompts", "train", True), ("someone/prompts", "test", True)]
    with pytest.raises(
        SpecError, match=r"^hf:someone/prompts: field 'text': no such column \(the dataset has 'prompt', 'id'\)$"
    ):
        check_dataset("hf:someone/prompts", "text", "text")

    def unreachable(self, name, timeout):
        raise ConnectionError("[Errno -2] Name or service not known")

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", unreachable)
    with pytest.raises(
        SpecError, match=r"^hf:someone/prompts cannot be fetched: the Hub cannot be reached \(no network\?\)"
    ):
        check_dataset("hf:someone/prompts", "text", "prompt")


def test_null_and_blank_texts_are_skipped_and_counted(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": ["first", None, "   ", "last"]}), tmp_path / "p.parquet")
    conversations = read_conversations(str(tmp_path / "p.parquet"), "text", "prompt")
    assert [c.messages[0].content for c in conversations] == ["first", "last"]
    assert conversations.read == 4 and conversations.skipped == {"no user turn": 2}
