"""A model's :class:`~engine.run.sources.PlanContext` from local files alone, before (or without) loading it.

The light tokenizer (:class:`~engine.backends.openai.tokenizer.FastTokenizer`, ``tokenizer.json``
through ``tokenizers``) of the model's folder: the demo model's converted folder once it exists
(:func:`engine.weights.models.converted_folder`), a local folder, a Hugging Face id's snapshot in
the local cache; synthetic weights have none (prompts are random token ids). Its vocabulary and
context length come from the declared config or the folder's ``config.json``. Nothing is
downloaded or converted and neither torch nor transformers is imported, so the app server (Launch's
traffic preview) and the what-if simulator (re-planning a stored run as its job planned it) call it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.run.sources import PlanContext
from engine.spec import ModelSpec, SpecError


@lru_cache(maxsize=8)
def _folder_tokenizer(folder: str) -> Any:
    from engine.backends.openai.tokenizer import FastTokenizer

    return FastTokenizer.from_folder(folder)


def _hub_folder(repo: str) -> Path | None:
    """A Hugging Face id's snapshot folder in the local cache (holding tokenizer.json), never the network."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - comes with tokenizers
        return None
    found = try_to_load_from_cache(repo, "tokenizer.json")
    return Path(found).parent if isinstance(found, str) else None


def model_folder(model: ModelSpec) -> tuple[Path | None, str]:
    """(the folder holding the model's tokenizer.json, or None; why there is none)."""
    from engine.weights.models import converted_folder, demo_gguf_path

    kind = model.kind
    if kind == "synthetic":
        return None, "synthetic weights have no tokenizer"
    if kind in ("demo", "gguf"):
        gguf = demo_gguf_path() if kind == "demo" else Path(model.source).expanduser()
        folder = converted_folder(gguf) if gguf.is_file() else None
        return folder, f"{model.label} is converted to a Hugging Face folder on its first run; run one job first"
    if kind == "local":
        folder = Path(model.source).expanduser()
        return (folder if (folder / "tokenizer.json").is_file() else None), f"{folder} has no tokenizer.json"
    repo = model.source.removeprefix("hf:")
    return _hub_folder(repo), f"{repo} has no tokenizer.json in the local Hugging Face cache"


def _config(model: ModelSpec, folder: Path | None) -> dict[str, Any]:
    from engine.weights.models import declared_config

    try:
        declared = declared_config(model)
    except SpecError:
        declared = None
    if declared:
        return declared
    try:
        return json.loads((folder / "config.json").read_text()) if folder else {}
    except (OSError, ValueError):
        return {}


def plan_context(model: ModelSpec) -> tuple[PlanContext, str | None]:
    """(the :class:`PlanContext` of ``model`` from local files, why it has no tokenizer (None: it has one))."""
    folder, why = model_folder(model)
    tokenizer = None
    if folder is not None:
        try:
            tokenizer = _folder_tokenizer(str(folder))
        except (OSError, ValueError, RuntimeError, LookupError) as exc:
            why = f"its tokenizer cannot be read ({type(exc).__name__}: {exc})"
    cfg = _config(model, folder)
    context = cfg.get("max_position_embeddings")
    vocab = len(tokenizer) if tokenizer is not None else int(cfg.get("vocab_size") or 32_000)
    return PlanContext(tokenizer, vocab, context if isinstance(context, int) else None), (
        None if tokenizer is not None else why
    )
