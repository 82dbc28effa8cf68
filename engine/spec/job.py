"""One benchmark job: model, recipe, workload, device, accuracy; its fingerprint."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from engine.spec.base import SpecError, _Strict, canonical_json, format_validation_error
from engine.spec.model import ModelSpec
from engine.spec.quality import QualitySpec
from engine.spec.recipes import TRANSFORMERS_KNOB_DEFAULTS, Recipe, TransformersRecipe
from engine.spec.rules import job_problems
from engine.spec.workload import SERVING_DEFAULTS, Workload, stored_form

_DEVICE = re.compile(r"^(cpu|cuda:\d+(,\d+)*)$")


class JobSpec(_Strict):
    """One benchmark: a model, an engine recipe, a workload, on a device."""

    model: ModelSpec
    recipe: Recipe = Field(default_factory=TransformersRecipe)
    workload: Workload = Field(default_factory=Workload)
    device: str = "cpu"
    name: str | None = Field(default=None, max_length=200)
    quality: QualitySpec = Field(default_factory=QualitySpec)

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        value = value.strip().lower()
        if not _DEVICE.match(value):
            raise ValueError(f"device {value!r} is not 'cpu', 'cuda:N' or 'cuda:N,M,...'")
        return value

    @model_validator(mode="after")
    def _check_combination(self) -> JobSpec:
        if isinstance(self.recipe, TransformersRecipe):
            problems = job_problems(self.recipe, self.device, self.workload, self.model.kind)
        else:  # the serving engines' recipes say what they cannot run themselves
            problems = self.recipe.job_problems(self.device, self.workload, self.model.kind)
        if problems:
            raise ValueError("; ".join(problems))
        if self.quality.enabled and isinstance(self.recipe, TransformersRecipe) and self.recipe.tensor_parallel:
            raise ValueError(
                "accuracy is not measured with tensor parallelism (sharding changes only the order of float sums); "
                "measure it on the same recipe without tensor_parallel, or drop the quality metrics"
            )
        if self.quality.enabled and not self.model.has_accuracy:
            raise ValueError(
                "synthetic weights have no accuracy: random weights make perplexity, fidelity and task scores "
                "meaningless; drop the quality metrics or use a real model (demo, org/name, a folder or a .gguf)"
            )
        return self

    def canonical_json(self) -> str:
        """Stable JSON: sorted keys, no spaces, defaults included (until_metric in its stored form)."""
        data = self.model_dump(mode="json")
        stored_form(data["workload"])
        return canonical_json(data)

    def fingerprint(self) -> str:
        """Identity of what runs (the display name is left out)."""
        # A job without an accuracy phase keeps the fingerprint it had before quality existed.
        exclude = {"name"} if self.quality.enabled else {"name", "quality"}
        data = self.model_dump(mode="json", exclude=exclude)
        data["workload"].pop("profile_steps", None)  # a profile runs after the measured figures are taken
        for key, default in SERVING_DEFAULTS.items():  # serving fields at their defaults keep old fingerprints
            if data["workload"].get(key) == default:
                data["workload"].pop(key, None)
        stored_form(data["workload"])  # until_metric as stored specs wrote it (tpot_ms.p50)
        if data["recipe"].get("trust_remote_code") is False:  # the knob came later: off keeps old fingerprints
            data["recipe"].pop("trust_remote_code")
        if data["recipe"].get("engine") == "transformers":  # recipe knobs at their defaults keep old fingerprints
            for key, default in TRANSFORMERS_KNOB_DEFAULTS.items():
                if data["recipe"].get(key) == default:
                    data["recipe"].pop(key, None)
        return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:16]


def parse_job_spec(data: dict[str, Any] | str) -> JobSpec:
    """Validate a spec from a dict or JSON text; raise :class:`SpecError` with one line."""
    try:
        if isinstance(data, str):
            return JobSpec.model_validate_json(data)
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc)) from exc
