"""Typed, pure job specifications.

Validation here never touches the file system, the environment or the network: it
checks shapes and ranges and says what is allowed. Whether a path exists or a model
fits its context is checked later by :mod:`engine.weights.models` (still before anything is
queued or stored).

The public names below are imported when first asked for (``from engine.spec import
JobSpec`` reads as before): an engine's recipe module imports :mod:`engine.spec.base`, and
this package's ``__init__`` runs first, so it must not import the registry of engines
(:mod:`engine.spec.engines`), which imports every engine's descriptor, itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what each name is, for type checkers (at run time they are imported when first asked for)
    from engine.spec.accuracy import ACCURACY_METRICS_HELP as ACCURACY_METRICS_HELP
    from engine.spec.accuracy import AccuracySpec as AccuracySpec
    from engine.spec.base import SpecError as SpecError
    from engine.spec.base import canonical_json as canonical_json
    from engine.spec.base import format_validation_error as format_validation_error
    from engine.spec.engines import Recipe as Recipe
    from engine.spec.job import JobSpec as JobSpec
    from engine.spec.job import parse_job_spec as parse_job_spec
    from engine.spec.model import ModelKind as ModelKind
    from engine.spec.model import ModelSpec as ModelSpec
    from engine.spec.recipes import EngineRecipe as EngineRecipe
    from engine.spec.workload import SERVING_DEFAULTS as SERVING_DEFAULTS
    from engine.spec.workload import Workload as Workload

_EXPORTS: dict[str, str] = {
    "SpecError": "engine.spec.base",
    "canonical_json": "engine.spec.base",
    "format_validation_error": "engine.spec.base",
    "JobSpec": "engine.spec.job",
    "parse_job_spec": "engine.spec.job",
    "ModelKind": "engine.spec.model",
    "ModelSpec": "engine.spec.model",
    "ACCURACY_METRICS_HELP": "engine.spec.accuracy",
    "AccuracySpec": "engine.spec.accuracy",
    "EngineRecipe": "engine.spec.recipes",
    "Recipe": "engine.spec.engines",
    "SERVING_DEFAULTS": "engine.spec.workload",
    "Workload": "engine.spec.workload",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.spec' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
