"""One benchmark job: model, recipe, workload, device, accuracy; its fingerprint."""

from __future__ import annotations

import hashlib
import re

from pydantic import Field, ValidationError, field_validator, model_validator

from engine.jsonvalue import JSONMapping
from engine.spec import engines
from engine.spec.accuracy import AccuracySpec
from engine.spec.base import SpecError, _Strict, canonical_json, format_validation_error
from engine.spec.engines import Recipe
from engine.spec.model import ModelSpec
from engine.spec.text import MAX_NAME, control_characters, quoted
from engine.spec.workload import SERVING_DEFAULTS, Workload, stored_form

_DEVICE = re.compile(r"^(cpu|cuda:\d+(,\d+)*)$")


class JobSpec(_Strict):
    """One benchmark: a model, an engine recipe, a workload, on a device.

    ``recipe`` is the recipe of any registered engine (:mod:`engine.spec.engines`), the
    default engine's when left out; it says itself what it cannot run.
    """

    model: ModelSpec
    recipe: Recipe = Field(default_factory=engines.default_recipe)
    workload: Workload = Field(default_factory=Workload)
    device: str = "cpu"
    name: str | None = Field(default=None, max_length=MAX_NAME)
    quality: AccuracySpec = Field(default_factory=AccuracySpec)

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        value = value.strip().lower()
        if not _DEVICE.match(value):
            raise ValueError(f"device {value!r} is not 'cpu', 'cuda:N' or 'cuda:N,M,...'")
        return value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        bad = control_characters(value or "")
        if bad:
            shown = ", ".join(repr(c) for c in bad[:4])
            raise ValueError(f"holds control characters ({shown}); a name is printable text ({quoted(value)})")
        return value

    @model_validator(mode="after")
    def _check_combination(self) -> JobSpec:
        problems = self.recipe.job_problems(self.device, self.workload, self.model.kind)
        if (self.workload.client_processes or 1) > 1 and not engines.get(
            self.recipe.engine
        ).capabilities.client_processes:
            problems.append(
                f"client_processes: the {self.recipe.engine} engine serves its requests inside the job's process; "
                f"several client processes need one whose requests leave it "
                f"({', '.join(engines.with_capability('client_processes'))})"
            )
        if self.workload.load_nodes and not engines.get(self.recipe.engine).capabilities.remote:
            problems.append(
                f"load_nodes: the {self.recipe.engine} engine's server listens on the job's own loopback; load from "
                f"other nodes needs an endpoint they reach ({', '.join(engines.with_capability('remote'))})"
            )
        if problems:
            raise ValueError("; ".join(problems))
        if self.quality.enabled and (problems := self.recipe.accuracy_problems()):
            raise ValueError("; ".join(problems))
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
        data["workload"] = self.workload.flat()  # the flat form every stored fingerprint was taken of
        data["workload"].pop("profile_steps", None)  # a profile runs after the measured figures are taken
        data["workload"].pop("client_processes", None)  # how many processes send the same requests
        data["workload"].pop("load_nodes", None)  # and on how many nodes
        for key, default in SERVING_DEFAULTS.items():  # serving fields at their defaults keep old fingerprints
            if data["workload"].get(key) == default:
                data["workload"].pop(key, None)
        stored_form(data["workload"])  # until_metric as stored specs wrote it (tpot_ms.p50)
        # recipe knobs added after runs were stored: at their defaults (the engine's descriptor says) they keep
        # the old fingerprints
        descriptor = engines.find(self.recipe.engine)
        for key, default in (descriptor.fingerprint_defaults if descriptor else {}).items():
            if key in data["recipe"] and data["recipe"][key] == default:
                data["recipe"].pop(key)
        return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:16]


def parse_job_spec(data: JSONMapping | str) -> JobSpec:
    """Validate a spec from a dict or JSON text; raise :class:`SpecError` with one line."""
    try:
        if isinstance(data, str):
            return JobSpec.model_validate_json(data)
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc)) from exc
