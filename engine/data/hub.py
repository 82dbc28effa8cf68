"""Hugging Face datasets as records: ``hf:ID[:SPLIT]`` from the Hub, or a folder saved with
``save_to_disk``, read through the ``datasets`` library (imported only when one is read).

A Hub dataset is streamed (``load_dataset(..., streaming=True)``): rows arrive as they are
downloaded and nothing is prepared on disk. With ``HF_HUB_OFFLINE=1`` (or
``HF_DATASETS_OFFLINE=1``) it is read from the local cache instead, which never downloads; a
dataset that is not there fails in one line saying so. The split defaults to ``train``.
A saved folder is memory-mapped by ``load_from_disk``; a saved ``DatasetDict`` needs a split
(``hf:FOLDER:SPLIT``) unless it has ``train`` or a single split.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Protocol

from engine.data.reading import first_line, listing, problem
from engine.spec import SpecError

PREFIX = "hf:"
DEFAULT_SPLIT = "train"
_BATCH = 1000
_HUB_TIMEOUT_S = 10.0


class _Dataset(Protocol):
    """What is read of a dataset the ``datasets`` library opened (``Dataset`` or, streamed, ``IterableDataset``)."""

    @property
    def column_names(self) -> list[str] | None: ...

    def select_columns(self, column_names: list[str]) -> _Dataset: ...

    def iter(self, batch_size: int) -> Iterator[dict[str, list[object]]]: ...


def is_saved_dataset(path: Path) -> bool:
    """Whether a folder was written by ``save_to_disk`` (a dataset or a dataset dict)."""
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


def parse(source: str) -> tuple[str, str | None]:
    """``hf:ID[:SPLIT]`` as (ID, SPLIT or None); ID may also be a saved dataset folder."""
    name, _, split = source.removeprefix(PREFIX).partition(":")
    if not name.strip():
        raise SpecError(f"dataset {source!r}: name a Hugging Face dataset as hf:ID or hf:ID:SPLIT")
    return name.strip(), (split.strip() or None)


def offline() -> bool:
    """Whether the Hugging Face libraries are told not to reach the network."""
    flags = (os.environ.get(name, "").strip().upper() for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return any(flag in {"1", "ON", "YES", "TRUE"} for flag in flags)


def rows(source: str, columns: tuple[str, ...]) -> Iterator[tuple[str, dict[str, object]]]:
    """Every row of a Hugging Face dataset with its place (``SOURCE row N``, from 1), only
    ``columns`` of it; a column the dataset lacks fails before the first row."""
    dataset = _open(source)
    names = dataset.column_names
    if names is not None:
        _check_columns(source, names, columns)
        dataset = dataset.select_columns(list(columns))
    return _rows(source, dataset, columns, checked=names is not None)


def check_reachable(source: str) -> None:
    """Fail in one line, within seconds, when a Hub dataset cannot be fetched: offline and not
    cached, no network, no such dataset, gated. A saved folder passes (it is local)."""
    name, _ = parse(source)
    if Path(name).expanduser().is_dir() or offline():
        return  # offline, _open reads the local cache only, and fails at once when it is not there
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().dataset_info(name, timeout=_HUB_TIMEOUT_S)
    except GatedRepoError as exc:
        raise SpecError(f"{source} cannot be fetched: the dataset is gated (accept its terms and log in)") from exc
    except RepositoryNotFoundError as exc:
        raise SpecError(f"{source} cannot be fetched: no such dataset on the Hub (or it is private)") from exc
    except Exception as exc:  # httpx/requests errors have no common base: all mean the Hub is out of reach
        raise SpecError(
            f"{source} cannot be fetched: the Hub cannot be reached (no network?): {first_line(exc)}"
        ) from exc


def _datasets() -> ModuleType:
    try:
        import datasets
    except ImportError as exc:
        raise SpecError("reading a Hugging Face dataset needs the datasets package (pip install datasets)") from exc
    datasets.logging.disable_progress_bar()
    return datasets


def _open(source: str) -> _Dataset:
    name, split = parse(source) if source.startswith(PREFIX) else (source, None)
    folder = Path(name).expanduser()
    if folder.is_dir():
        return _open_saved(source, folder, split)
    datasets = _datasets()
    cached = offline()
    try:
        return datasets.load_dataset(name, split=split or DEFAULT_SPLIT, streaming=not cached)
    except Exception as exc:  # the datasets library raises a dozen types for "cannot load": one line
        if cached:
            reason = "HF_HUB_OFFLINE=1 is set and it is not in the local cache (unset it to reach the Hub)"
        else:
            reason = first_line(exc)
        raise SpecError(f"{source} cannot be fetched: {reason}") from exc


def _open_saved(source: str, folder: Path, split: str | None) -> _Dataset:
    if not is_saved_dataset(folder):
        raise SpecError(f"dataset {source}: {folder} is not a folder written by save_to_disk")
    datasets = _datasets()
    try:
        loaded = datasets.load_from_disk(str(folder))
    except Exception as exc:  # a damaged folder: arrow, JSON or file errors, one line either way
        raise SpecError(f"dataset {source} cannot be read: {first_line(exc)}") from exc
    if not isinstance(loaded, datasets.DatasetDict):
        if split is not None:
            raise SpecError(f"dataset {source}: {folder} holds one saved split; name it without ':{split}'")
        return loaded
    splits = list(loaded)
    if split is None:
        split = DEFAULT_SPLIT if DEFAULT_SPLIT in splits else (splits[0] if len(splits) == 1 else None)
    if split not in splits:
        raise SpecError(f"dataset {source}: name one of its splits as hf:FOLDER:SPLIT ({listing(splits)})")
    return loaded[split]


def _check_columns(source: str, names: list[str], columns: tuple[str, ...]) -> None:
    missing = [name for name in columns if name not in names]
    if missing:
        raise problem(source, missing[0], f"no such column (the dataset has {listing(names)})")


def _rows(
    source: str, dataset: _Dataset, columns: tuple[str, ...], checked: bool
) -> Iterator[tuple[str, dict[str, object]]]:
    number = 0
    batches = dataset.iter(batch_size=_BATCH)
    while True:
        try:
            batch = next(batches, None)
        except Exception as exc:  # a stream can break mid-way (network, a bad shard): one line with the row
            raise SpecError(f"{source} row {number + 1} cannot be read: {first_line(exc)}") from exc
        if batch is None:
            return
        if not checked:
            _check_columns(source, list(batch), columns)
            checked = True
        for values in zip(*(batch[name] for name in columns), strict=True):
            number += 1
            yield f"{source} row {number}", dict(zip(columns, values, strict=True))
