"""How another process builds the same OpenAI client: its settings out (never the key, but for a remote node), and
the key and tokenizer a client process builds its client with (:mod:`engine.backends.openai.client_process`).

One reader of the API key (:func:`api_key`) serves the job's own client and every client process: the key is read
from its variable (or, on a remote node, sent with the settings) and registered with the secret scrubber.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from engine.backends.base import BackendError
from engine.jsonvalue import JSONMapping, JSONObject
from engine.secrets import register

if TYPE_CHECKING:
    from engine.backends.base import Tokenizer
    from engine.backends.openai.tokenizer import FastTokenizer


def api_key(env_name: str | None, given: str | None = None, required: bool = True) -> str | None:
    """The API key: ``given`` (a remote node's, sent with its settings), else its variable's value; registered with
    the scrubber (never in a reason, a log line or a stored field). A named variable that is not set is a
    BackendError when ``required``."""
    key = given or (os.environ.get(env_name) if env_name else None)
    if env_name and not key and required:
        raise BackendError(f"the API key variable {env_name} is not set in the environment")
    if key:
        register(key)
    return key


def tokenizer_of(source: JSONMapping | None, key: str | None, server_root: str, model_name: str) -> Tokenizer | None:
    """The tokenizer the settings name: the model folder's files, the server's /tokenize, or files sent inline."""
    kind = (source or {}).get("kind")
    if kind == "files":
        from engine.backends.openai.tokenizer import local_tokenizer

        return local_tokenizer(source["path"], source.get("revision"))  # type: ignore[index]
    if kind == "server":
        from engine.backends.openai.server_tokenizer import ServerTokenizer

        return ServerTokenizer(server_root, model_name, {"Authorization": f"Bearer {key}"} if key else {})
    if kind == "inline":
        return _inline_tokenizer(source["files"])  # type: ignore[index]
    return None


def _inline_tokenizer(files: dict[str, str]) -> FastTokenizer:
    """The tokenizer of files sent inline (a remote node has not the model's folder): written to a
    temporary folder, read, and the folder removed (a long text is then encoded, not cached by them)."""
    from engine.backends.openai.tokenizer import local_tokenizer

    folder = Path(tempfile.mkdtemp(prefix="latencylab-tokenizer-"))
    try:
        for name, text in files.items():
            (folder / Path(name).name).write_text(text, encoding="utf-8")
        tokenizer = local_tokenizer(str(folder))
        tokenizer.files = ()
        return tokenizer
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remote_settings(settings: JSONMapping, api_key: str | None, tokenizer: Tokenizer | None) -> JSONObject:
    """``settings`` (a client's :meth:`client_settings`) for a process on another node: the key itself,
    and a local tokenizer's files inline."""
    out = dict(settings)
    if api_key:
        out["api_key"] = api_key
    files = getattr(tokenizer, "files", ()) if out.get("tokenizer") else ()
    if out.get("tokenizer") and out["tokenizer"].get("kind") == "files" and files:
        folder = Path(files[0]).parent
        names = [Path(f).name for f in files] + ["chat_template.jinja"]
        out["tokenizer"] = {
            "kind": "inline",
            "files": {n: (folder / n).read_text(encoding="utf-8") for n in names if (folder / n).is_file()},
        }
    return out
