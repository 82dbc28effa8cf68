"""Typed, pure job specifications.

Validation here never touches the file system, the environment or the network: it
checks shapes and ranges and says what is allowed. Whether a path exists or a model
fits its context is checked later by :mod:`engine.weights.models` (still before anything is
queued or stored).
"""

from engine.spec.base import SpecError, canonical_json, format_validation_error
from engine.spec.job import JobSpec, parse_job_spec
from engine.spec.model import ModelKind, ModelSpec
from engine.spec.quality import QUALITY_METRICS_HELP, QualitySpec
from engine.spec.recipes import (
    ENGINES,
    RECIPE_CLASSES,
    SERVING_ENGINES,
    TRANSFORMERS_KNOB_DEFAULTS,
    OpenAIRecipe,
    Recipe,
    TransformersRecipe,
    VllmRecipe,
    VllmServerRecipe,
)
from engine.spec.workload import SERVING_DEFAULTS, Workload

__all__ = [
    "ENGINES",
    "QUALITY_METRICS_HELP",
    "RECIPE_CLASSES",
    "SERVING_DEFAULTS",
    "SERVING_ENGINES",
    "TRANSFORMERS_KNOB_DEFAULTS",
    "JobSpec",
    "ModelKind",
    "ModelSpec",
    "OpenAIRecipe",
    "QualitySpec",
    "Recipe",
    "SpecError",
    "TransformersRecipe",
    "VllmRecipe",
    "VllmServerRecipe",
    "Workload",
    "canonical_json",
    "format_validation_error",
    "parse_job_spec",
]
