"""The client's tokenizer without transformers: a model's ``tokenizer.json`` through the ``tokenizers`` library.

A Hugging Face "fast" tokenizer *is* its ``tokenizer.json`` run by the ``tokenizers`` library;
transformers adds the special tokens of ``tokenizer_config.json`` and renders the chat template
with jinja2. :class:`FastTokenizer` does the same, the way transformers 5 does it (so the ids are
the same, checked against transformers on the demo model), in a few milliseconds and megabytes
instead of transformers' seconds and hundreds of megabytes (it imports torch):

- ``encode(text, add_special_tokens=True)``: the post-processor of ``tokenizer.json`` adds the
  special tokens; when ``tokenizer_config.json`` sets ``add_bos_token``/``add_eos_token`` (or the
  file has no post-processor) it is rebuilt from them, as transformers does; truncation and
  padding stored in the file are off, as transformers calls them;
- ``decode(ids, skip_special_tokens=False)``, with ``clean_up_tokenization_spaces`` honoured
  (never for BPE models, as transformers 5);
- ``apply_chat_template(messages, add_generation_prompt=..., tokenize=...)``: the template of
  ``chat_template.jinja`` (else ``tokenizer_config.json``'s ``chat_template``) rendered in jinja2's
  sandbox with transformers' settings (``trim_blocks``, ``lstrip_blocks``, loop controls,
  ``tojson``, ``raise_exception``, ``strftime_now``) and the special tokens as variables, then
  encoded without special tokens;
- ``eos_token_id``, ``bos_token_id``, ``len()`` (the vocabulary with added tokens).

:func:`load_tokenizer` finds the files (a local folder, or the Hugging Face cache and hub for an
id) and falls back to the server's own ``/tokenize`` (:mod:`engine.backends.openai.server_tokenizer`)
where the model has no ``tokenizer.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject

if TYPE_CHECKING:
    from jinja2 import Template
    from tokenizers import Tokenizer as TokenizerFile

    from engine.backends.base import Tokenizer

LONG_TEXT = 32_768  # characters: texts this long have their ids cached (see FastTokenizer.encode)
_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_CLEANUPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))  # fmt: skip


class TokenizerFilesMissing(LookupError):
    """The model has no ``tokenizer.json`` this client can read."""


def _token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken object."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _chat_template(config: JSONMapping, jinja_file: Path | None) -> str | None:
    """``chat_template.jinja`` first (transformers 5 saves it there), else the config's own template."""
    if jinja_file is not None and jinja_file.is_file():
        return jinja_file.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):  # several named templates: the default one
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    return template if isinstance(template, str) else None


class FastTokenizer:
    """``tokenizer.json`` + ``tokenizer_config.json`` (+ ``chat_template.jinja``), as transformers reads them."""

    def __init__(
        self, backend: TokenizerFile, config: JSONMapping | None = None, chat_template: str | None = None
    ) -> None:
        self._tok = backend
        self._config = dict(config or {})
        self.chat_template = chat_template
        self.special_tokens_map = {k: t for k in _SPECIAL if (t := _token_text(self._config.get(k))) is not None}
        for text in self.special_tokens_map.values():  # named special tokens are special (transformers adds them)
            if backend.token_to_id(text) is None:
                from tokenizers import AddedToken

                backend.add_special_tokens([AddedToken(text, special=True)])
        backend.no_truncation()
        backend.no_padding()
        self.clean_up_tokenization_spaces = bool(self._config.get("clean_up_tokenization_spaces", False))
        self._bpe = type(backend.model).__name__ == "BPE"
        if "add_bos_token" in self._config or "add_eos_token" in self._config or backend.post_processor is None:
            self._rebuild_post_processor()
        self._template: Template | None = None
        self.files: tuple[Path, ...] = ()  # where it was read from (the key of long texts' cached ids)
        self._files_digest: str | None = None

    @classmethod
    def from_files(cls, tokenizer_json: Path, config_json: Path | None, jinja_file: Path | None) -> FastTokenizer:
        """Read the files (``config_json`` and ``jinja_file`` may be absent)."""
        from tokenizers import Tokenizer

        config: JSONObject = {}
        if config_json is not None and config_json.is_file():
            loaded = json.loads(config_json.read_text(encoding="utf-8"))
            config = loaded if isinstance(loaded, dict) else {}
        tokenizer = cls(Tokenizer.from_file(str(tokenizer_json)), config, _chat_template(config, jinja_file))
        tokenizer.files = tuple(p for p in (tokenizer_json, config_json) if p is not None and p.is_file())
        return tokenizer

    @classmethod
    def from_folder(cls, folder: str | Path) -> FastTokenizer:
        """A model folder's tokenizer; :class:`TokenizerFilesMissing` without ``tokenizer.json``."""
        path = Path(folder)
        if not (path / "tokenizer.json").is_file():
            raise TokenizerFilesMissing(f"{path} has no tokenizer.json")
        return cls.from_files(path / "tokenizer.json", path / "tokenizer_config.json", path / "chat_template.jinja")

    # -- special tokens ----------------------------------------------------------------------------
    def _id(self, name: str) -> int | None:
        text = self.special_tokens_map.get(name)
        return None if text is None else self._tok.token_to_id(text)

    @property
    def eos_token_id(self) -> int | None:
        return self._id("eos_token")

    @property
    def bos_token_id(self) -> int | None:
        return self._id("bos_token")

    @property
    def pad_token_id(self) -> int | None:
        return self._id("pad_token")

    def _rebuild_post_processor(self) -> None:
        """transformers' ``update_post_processor``: BOS/EOS around each sequence as the config says."""
        from tokenizers import processors

        bos, eos = self.special_tokens_map.get("bos_token"), self.special_tokens_map.get("eos_token")
        add_bos = bool(self._config.get("add_bos_token", False)) and bos is not None
        add_eos = bool(self._config.get("add_eos_token", False)) and eos is not None
        single = f"{(bos + ':0 ') if add_bos else ''}$A:0{(' ' + eos + ':0') if add_eos else ''}"
        pair = f"{single}{(' ' + bos + ':1') if add_bos else ''} $B:1{(' ' + eos + ':1') if add_eos else ''}"
        specials = [(t, self._tok.token_to_id(t)) for t, on in ((bos, add_bos), (eos, add_eos)) if on and t]
        self._tok.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=specials)

    # -- the Tokenizer protocol ------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text`` (with the model's special tokens unless told not to).

        A long text (the default corpus every synthetic run cuts its prompts from) is encoded once per
        tokenizer and text: its ids are kept in the cache folder, keyed by both."""
        if len(text) >= LONG_TEXT and self.files:
            return self._cached_ids(text, add_special_tokens)
        ids: list[int] = self._tok.encode(text, add_special_tokens=add_special_tokens).ids
        return ids

    def _cached_ids(self, text: str, add_special_tokens: bool) -> list[int]:
        import hashlib
        from array import array

        from engine.settings import get_settings

        if self._files_digest is None:
            digest = hashlib.sha256()
            for path in self.files:
                digest.update(path.read_bytes())
            self._files_digest = digest.hexdigest()
        key = hashlib.sha256(f"{self._files_digest}:{add_special_tokens}:".encode() + text.encode()).hexdigest()[:24]
        path = get_settings().cache_dir / "token_ids" / f"{key}.i32"
        try:
            stored = array("i")
            stored.frombytes(path.read_bytes())
            return stored.tolist()
        except (OSError, ValueError):
            pass
        ids: list[int] = self._tok.encode(text, add_special_tokens=add_special_tokens).ids
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_bytes(array("i", ids).tobytes())
            tmp.replace(path)  # atomic: a concurrent job never reads half a file
        except OSError:
            pass
        return ids

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text of ``token_ids``."""
        text: str = self._tok.decode(list(token_ids), skip_special_tokens=skip_special_tokens)
        if self.clean_up_tokenization_spaces and not self._bpe:
            for before, after in _CLEANUPS:
                text = text.replace(before, after)
        return text

    def __len__(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def apply_chat_template(
        self,
        conversation: Sequence[JSONMapping],
        add_generation_prompt: bool = False,
        tokenize: bool = True,
        return_dict: bool = False,
        **kwargs: object,
    ) -> str | list[int] | dict[str, list[int]]:
        """The conversation rendered by the model's chat template: ids (``tokenize``) or text.

        ``return_dict=True`` gives ``{"input_ids": ids}`` as transformers' default does."""
        if not conversation:
            raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
        text = self._render([dict(m) for m in conversation], add_generation_prompt, kwargs)
        if not tokenize:
            return text
        ids = self.encode(text, add_special_tokens=False)
        return {"input_ids": ids, "attention_mask": [1] * len(ids)} if return_dict else ids

    def _render(self, messages: list[JSONObject], add_generation_prompt: bool, extra: Mapping[str, object]) -> str:
        if self._template is None:
            if not self.chat_template:
                raise ValueError("this tokenizer has no chat template (no chat_template.jinja or chat_template)")
            self._template = compile_chat_template(self.chat_template)
        variables = {**self.special_tokens_map, **extra}
        rendered: str = self._template.render(
            messages=messages, tools=None, documents=None, add_generation_prompt=add_generation_prompt, **variables
        )
        return rendered


def compile_chat_template(source: str) -> Template:
    """A chat template compiled as transformers compiles it (jinja2 sandbox, its filters and globals)."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: object,
        ensure_ascii: bool = False,
        indent: int | str | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def _hub_files(repo: str, revision: str | None) -> FastTokenizer:
    """An id's tokenizer files from the Hugging Face cache (or the hub when online)."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError
    except ImportError as exc:  # pragma: no cover - huggingface_hub comes with tokenizers
        raise TokenizerFilesMissing(f"huggingface_hub is not installed: {exc}") from exc

    def optional(name: str) -> Path | None:
        try:
            return Path(hf_hub_download(repo, name, revision=revision))
        except (EntryNotFoundError, LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError):
            return None

    main = optional("tokenizer.json")
    if main is None:
        raise TokenizerFilesMissing(f"{repo} has no tokenizer.json in the Hugging Face cache or hub")
    return FastTokenizer.from_files(main, optional("tokenizer_config.json"), optional("chat_template.jinja"))


def local_tokenizer(path: str, revision: str | None = None) -> FastTokenizer:
    """The tokenizer of a model folder or a Hugging Face id; :class:`TokenizerFilesMissing` without one."""
    if Path(path).is_dir():
        return FastTokenizer.from_folder(path)
    return _hub_files(path, revision)


def load_tokenizer(
    path: str | None,
    revision: str | None,
    label: str,
    server: Callable[[], Tokenizer | None] | None = None,
) -> Tokenizer | None:
    """The client's tokenizer: local files first, else ``server()`` (the server's ``/tokenize``); None without weights.

    Raises ``LookupError`` with one line when neither is there."""
    if path is None:
        return None  # synthetic weights: prompts go as token ids
    try:
        return local_tokenizer(path, revision)
    except TokenizerFilesMissing as missing:
        remote = server() if server is not None else None
        if remote is not None:
            return remote
        raise LookupError(
            f"cannot load the tokenizer of {label}: {missing}, and the server offers no /tokenize "
            "(save the tokenizer as tokenizer.json beside the model, or serve it with vLLM or SGLang)"
        ) from missing
    except (OSError, ValueError, RuntimeError) as exc:  # an unreadable or malformed tokenizer.json
        raise LookupError(f"cannot load the tokenizer of {label}: {exc}") from exc
