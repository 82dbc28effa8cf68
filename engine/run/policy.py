"""Which files a job may read: every input path under the allowed folders.

The folders are :func:`engine.settings.input_folders`: ``LATENCYLAB_ALLOWED_ROOTS`` (or the older
``LATENCYLAB_ALLOWED_MODEL_ROOTS``, separated by ``os.pathsep``), else, when sign-in is on, the data
folder's ``traces/``, ``datasets/``, ``models/`` and ``prompts/``; with neither (a local app, sign-in
off) a job may read anywhere. Each path a spec names (:func:`engine.spec.paths.input_paths`) is
resolved (``~``, relative parts, every symlink) and must then lie inside one resolved folder, so a
symlink inside a folder that points outside is refused. Checked when a job is submitted (``submit``,
Launch) and again when it starts (pre-flight runs in the job's own process), before any file is opened.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.settings import input_folders
from engine.spec import JobSpec, SpecError
from engine.spec.paths import InputPath, input_paths


def allowed_roots() -> tuple[str, list[Path]] | None:
    """The allowed folders in words ("the operator allows (...)", the end of a refusal) and resolved; None when
    any path is allowed."""
    folders = input_folders()
    if folders is None:
        return None
    who = "the operator allows" if folders.configured else "this app reads with sign-in on"
    return f"{who} ({folders.words()})", [Path(os.path.realpath(f)) for f in folders.folders]


def check_path(field: str, value: str, roots: tuple[str, list[Path]] | None = None) -> None:
    """Raise :class:`SpecError` naming ``field`` when ``value`` resolves outside the allowed folders."""
    roots = roots if roots is not None else allowed_roots()
    if roots is None:
        return
    text, resolved = roots
    real = Path(os.path.realpath(Path(value).expanduser()))
    if not any(real == root or root in real.parents for root in resolved):
        raise SpecError(f"{field} {value} is outside the folders {text}")


def _check_input(item: InputPath, roots: tuple[str, list[Path]]) -> None:
    if item.hub_id and not Path(item.value).expanduser().exists():
        return  # a hub id, not a local folder here: downloaded into the cache, not read from the user's disk
    check_path(item.field, item.value, roots)


def check_inputs(spec: JobSpec) -> None:
    """Every path the job reads is inside the allowed folders; raises SpecError for the first that is not."""
    roots = allowed_roots()
    if roots is None:
        return
    for item in input_paths(spec):
        _check_input(item, roots)
