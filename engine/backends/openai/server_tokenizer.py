"""The server's own tokenizer, for a model with no ``tokenizer.json`` here: vLLM's and SGLang's ``/tokenize``.

``POST {root}/tokenize`` (``root``: the base URL without ``/v1``) with ``prompt`` (or ``messages``
for the chat template) returns ``tokens``; ``POST {root}/detokenize`` with ``tokens`` returns the
``prompt`` text. Calls are synchronous (the standard library's HTTP client) and made while a job
plans its requests, never per request: prompts go to such a server as token ids
(:attr:`ServerTokenizer.sends_ids`), which the servers that have ``/tokenize`` accept.
What this tokenizer cannot know: the end-of-sequence id (None) and the vocabulary size (0).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

from engine.jsonvalue import JSONMapping, JSONObject


class ServerTokenizer:
    """Tokenizes through the server (``/tokenize``, ``/detokenize``)."""

    sends_ids = True  # prompts go to the server as token ids: no /detokenize call per request
    eos_token_id = None

    def __init__(
        self, root: str, model: str, headers: Mapping[str, str] | None = None, timeout_s: float = 30.0
    ) -> None:
        self._root = root.rstrip("/")
        self._model = model
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._timeout_s = timeout_s

    def _post(self, path: str, body: JSONObject) -> JSONObject:
        data = json.dumps({"model": self._model, **body}).encode()
        req = urllib.request.Request(self._root + path, data=data, headers=self._headers, method="POST")
        with urllib.request.urlopen(req, timeout=self._timeout_s) as resp:
            out = json.loads(resp.read())
        if not isinstance(out, dict):
            raise ValueError(f"{path} answered {type(out).__name__}, not an object")
        return out

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids from the server."""
        return [
            int(t)
            for t in self._post("/tokenize", {"prompt": text, "add_special_tokens": add_special_tokens})["tokens"]
        ]

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text from the server."""
        return str(self._post("/detokenize", {"tokens": [int(t) for t in token_ids]})["prompt"])

    def __len__(self) -> int:
        return 0  # unknown: the server does not say

    def apply_chat_template(
        self,
        conversation: Sequence[JSONMapping],
        add_generation_prompt: bool = False,
        tokenize: bool = True,
        return_dict: bool = False,
        **_kwargs: object,
    ) -> str | list[int] | dict[str, list[int]]:
        """The server's chat template applied to ``conversation`` (ids only: the server returns no text)."""
        if not tokenize:
            raise ValueError("the server's /tokenize returns token ids, not the rendered text")
        body = {"messages": [dict(m) for m in conversation], "add_generation_prompt": add_generation_prompt,
                "add_special_tokens": False}  # fmt: skip
        ids = [int(t) for t in self._post("/tokenize", body)["tokens"]]
        return {"input_ids": ids, "attention_mask": [1] * len(ids)} if return_dict else ids


def probe(root: str, model: str, headers: Mapping[str, str] | None = None) -> ServerTokenizer | None:
    """A :class:`ServerTokenizer` when the server at ``root`` tokenizes (one small call), else None."""
    tokenizer = ServerTokenizer(root, model, headers, timeout_s=10.0)
    try:
        tokenizer.encode("hello", add_special_tokens=False)
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return None
    return tokenizer
