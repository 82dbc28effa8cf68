"""The client's tokenizer without transformers: tokenizer.json through tokenizers, or the server's /tokenize."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import fake_server

from engine.backends.openai.server_tokenizer import ServerTokenizer, probe
from engine.backends.openai.tokenizer import FastTokenizer, TokenizerFilesMissing, load_tokenizer

TEXTS = [
    "Hello world!",
    "  leading spaces and <|im_start|> a special token inside",
    "Ünïcödé — emoji 🎉 and\nnewlines\t tabs",
    "The quick brown fox. It's 3.14, isn't it?",
    "",
]
CHATS = [
    [{"role": "user", "content": "hi there"}],
    [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello!"},
        {"role": "user", "content": "and?"},
    ],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why is the sky blue?"}],
]


@pytest.fixture(scope="module")
def fast(demo_folder: Path) -> FastTokenizer:
    return FastTokenizer.from_folder(demo_folder)


def test_the_demo_tokenizer_reads_its_special_tokens_and_template(fast) -> None:
    assert fast.eos_token_id == 2 and fast.bos_token_id == 1 and len(fast) == 49152
    assert fast.decode(fast.encode("Hello world!")) == "Hello world!"
    text = fast.apply_chat_template(CHATS[0], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n")
    ids = fast.apply_chat_template(CHATS[0], add_generation_prompt=True)
    assert ids == fast.encode(text, add_special_tokens=False) and ids[0] == fast.bos_token_id
    assert fast.apply_chat_template(CHATS[0], return_dict=True)["input_ids"] == fast.apply_chat_template(CHATS[0])


def test_bos_and_eos_from_the_config_rebuild_the_post_processor(demo_folder, tmp_path) -> None:
    for name in ("tokenizer.json", "chat_template.jinja"):
        (tmp_path / name).write_bytes((demo_folder / name).read_bytes())
    config = json.loads((demo_folder / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "add_bos_token": True}))
    tok = FastTokenizer.from_folder(tmp_path)
    assert tok.encode("hi")[0] == tok.bos_token_id and tok.encode("hi", add_special_tokens=False)[0] != 1


def test_a_folder_without_tokenizer_json_falls_back_to_the_server(tmp_path) -> None:
    with pytest.raises(TokenizerFilesMissing):
        FastTokenizer.from_folder(tmp_path)
    with fake_server(tokenize=True) as server:
        root = server.base_url.removesuffix("/v1")
        remote = load_tokenizer(str(tmp_path), None, "x", lambda: probe(root, "fake"))
        assert isinstance(remote, ServerTokenizer) and remote.sends_ids
        assert remote.encode("abc") == [97, 98, 99]
        assert remote.apply_chat_template([{"role": "user", "content": "ab"}]) == [97, 98]
    with fake_server(tokenize=False) as server:
        root = server.base_url.removesuffix("/v1")
        with pytest.raises(LookupError, match="no tokenizer.json, and the server offers no /tokenize"):
            load_tokenizer(str(tmp_path), None, "my model", lambda: probe(root, "fake"))
    assert load_tokenizer(None, None, "synthetic", None) is None


@pytest.mark.slow
def test_the_same_ids_as_transformers_on_the_demo_model(fast, demo_folder) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(demo_folder))
    for text in TEXTS:
        for special in (True, False):
            assert fast.encode(text, add_special_tokens=special) == hf.encode(text, add_special_tokens=special)
        ids = hf.encode(text) + [hf.eos_token_id]
        for skip in (True, False):
            assert fast.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
    for chat in CHATS:
        for gen in (True, False):
            ours = fast.apply_chat_template(chat, add_generation_prompt=gen)
            assert ours == hf.apply_chat_template(chat, add_generation_prompt=gen, tokenize=True, return_dict=False)
            assert fast.apply_chat_template(chat, add_generation_prompt=gen, tokenize=False) == hf.apply_chat_template(
                chat, add_generation_prompt=gen, tokenize=False
            )
    assert (len(fast), fast.eos_token_id, fast.bos_token_id) == (len(hf), hf.eos_token_id, hf.bos_token_id)


def test_chat_prompt_ids_from_any_tokenizer(fast) -> None:
    from engine.backends.base import chat_prompt_ids

    ids = chat_prompt_ids(fast, CHATS[1])
    assert ids == fast.apply_chat_template(CHATS[1], add_generation_prompt=True)

    class DictTokenizer:  # transformers 5's default return
        def apply_chat_template(self, conversation, **kw):  # type: ignore[no-untyped-def]
            return {"input_ids": [7, 8]}

    assert chat_prompt_ids(DictTokenizer(), CHATS[0]) == [7, 8]  # type: ignore[arg-type]
