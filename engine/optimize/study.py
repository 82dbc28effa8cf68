"""A study's definition (pure pydantic): the base spec, objectives, constraints, budget, sampler, knobs.

* **Objectives** are metric keys of the registry (:mod:`engine.measure.registry`):
  ``tpot_ms_p50``, ``itl_ms_p90``, ``output_tokens_per_s`` (per GPU on a GPU); the older short
  spellings (``tpot_p50``, ``ttft_p99``, ``tokens_per_s``) are read as those keys by
  :func:`engine.measure.registry.canonical`. Which way is better comes from the registry.
  ``ppl_increase_pct`` (the perplexity increase over the study's base recipe, trial 0) is the one
  derived objective. Two objectives make a Pareto study (e.g. ``tpot_ms_p50,ppl_increase_pct``:
  speed against accuracy).
* **Constraints**: accuracy (perplexity increase, KL mean, greedy flip rate, task accuracy),
  latency SLOs (any registry metric with a bound), and the memory fit the what-if estimator
  predicts. A trial is feasible only when every constraint was *measured* and holds.
* **Budget**: trials (recipes measured, reused ones included) and/or wall minutes; ``parallel``
  trials in flight at once (one per free device).
* **Knobs**: the recipe knobs searched (``attention`` stands for ``attn_implementation``),
  their candidate values (``values``), values left out (``exclude``) and knobs pinned (``pin``,
  set on the base recipe). :mod:`engine.optimize.space` turns this into the search space.
"""

from __future__ import annotations

import re
from typing import Literal, TypeAlias

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from engine.jsonvalue import JSONMapping, JSONScalar
from engine.measure import registry
from engine.spec import JobSpec, SpecError, parse_job_spec
from engine.spec.base import _Strict

PPL_INCREASE = "ppl_increase_pct"  # derived: perplexity over the base recipe's, in %
DEFAULT_OBJECTIVE = "tpot_ms_p50"
KNOB_ALIASES: dict[str, str] = {"attention": "attn_implementation", "attn": "attn_implementation"}
Sampler = Literal["tpe", "nsga2", "random", "grid"]
KnobValue: TypeAlias = JSONScalar  # a searched recipe knob's value (Optuna's categorical choices are these)
Params: TypeAlias = dict[str, KnobValue]  # a trial's recipe overrides, knob by knob
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:+-]{0,199}$")


def knob_value(annotation: object, name: str, value: object) -> KnobValue:
    """``value`` as a knob of type ``annotation`` (``"4"`` -> 4, ``"none"`` -> None where the knob has no
    ``"none"`` choice); ValueError naming a value the knob cannot take."""
    adapter = TypeAdapter(annotation)
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        if isinstance(value, str) and value.strip().lower() in ("none", "null"):
            return knob_value(annotation, name, None)
        raise ValueError(f"{name}={value!r} is not a value of that knob") from exc


def objective_choices() -> list[str]:
    """What a study is offered to optimise (the Optimize page): the registry's Compare figures of speed,
    throughput, energy and accuracy in display order, then the perplexity increase."""
    kinds = ("latency", "throughput", "energy", "accuracy")
    return [*(m.key for m in registry.shown_in("compare") if m.kind in kinds), PPL_INCREASE]


def objective_key(name: str) -> str:
    """The registry key of an objective (any spelling :func:`registry.canonical` reads); ValueError otherwise."""
    key = name if name == PPL_INCREASE else registry.canonical(name)
    if key == PPL_INCREASE or registry.lookup(key).is_metric:
        return key
    raise ValueError(
        f"unknown objective {name!r}; use a metric key such as tpot_ms_p50, ttft_ms_p99, output_tokens_per_s, "
        f"quality.kl_mean or {PPL_INCREASE}"
    )


def minimise(key: str) -> bool:
    """Whether smaller is better for an objective key (the registry says; the derived increase: yes)."""
    return True if key == PPL_INCREASE else registry.minimise(key)


class Constraints(_Strict):
    """What a feasible recipe must meet. Accuracy bounds are relative to the reference where the
    metric is (KL, flips), and to the study's base recipe for the perplexity increase."""

    max_ppl_increase_pct: float | None = Field(default=None, ge=0, le=1e6, description="perplexity increase <= %")
    max_kl_mean: float | None = Field(default=None, ge=0, le=1e6, description="KL mean vs reference <= nats")
    max_greedy_flip_rate: float | None = Field(default=None, ge=0, le=1, description="greedy flip rate <= (0..1)")
    min_task_accuracy: float | None = Field(default=None, ge=0, le=1, description="every task's accuracy >= (0..1)")
    slo: dict[str, float] = Field(default_factory=dict, description="metric key -> bound (<= or >= by direction)")
    fit_memory: bool = Field(default=True, description="prune recipes the what-if estimator says do not fit")

    @field_validator("slo", mode="before")
    @classmethod
    def _one_spelling(cls, value: object) -> object:
        """SLO keys in any spelling (``ttft_p99``, ``ttft_ms.p99``) read as metric keys."""
        return {registry.canonical(k): v for k, v in value.items()} if isinstance(value, dict) else value

    @field_validator("slo")
    @classmethod
    def _check_slo(cls, value: dict[str, float]) -> dict[str, float]:
        for key in value:
            metric = registry.lookup(key)
            if not metric.is_metric or metric.kind not in ("latency", "throughput", "memory"):
                raise ValueError(f"SLO {key!r} is not a latency, throughput or memory metric (e.g. ttft_ms_p99)")
        return value

    def quality_metrics(self) -> tuple[str, ...]:
        """The accuracy metrics these constraints need measured (``ppl``, ``fidelity``)."""
        out = []
        if self.max_ppl_increase_pct is not None:
            out.append("ppl")
        if self.max_kl_mean is not None or self.max_greedy_flip_rate is not None:
            out.append("fidelity")
        return tuple(out)


class Budget(_Strict):
    """How much the study may measure: trials and/or wall minutes; trials in flight at once."""

    trials: int = Field(default=10, ge=1, le=10_000)
    max_minutes: float | None = Field(default=None, gt=0, le=60 * 24 * 30)
    parallel: int = Field(default=1, ge=1, le=64)


class StudyDefinition(_Strict):
    """Everything a study is: validated once, stored as JSON, read back by every advancer."""

    name: str = Field(min_length=1, max_length=200)
    base: JobSpec
    objectives: tuple[str, ...] = (DEFAULT_OBJECTIVE,)
    constraints: Constraints = Field(default_factory=Constraints)
    budget: Budget = Field(default_factory=Budget)
    sampler: Sampler = "tpe"
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    knobs: tuple[str, ...] = ()
    values: dict[str, tuple[object, ...]] = Field(default_factory=dict)  # any value: knob_value coerces it
    exclude: dict[str, tuple[object, ...]] = Field(default_factory=dict)
    pin: dict[str, object] = Field(default_factory=dict)
    reuse: bool = Field(default=True, description="a recipe already measured (same fingerprint) reuses its run")
    timeout_s: float = Field(default=3600.0, gt=0, le=7 * 24 * 3600)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        value = value.strip()
        if not _NAME.match(value):
            raise ValueError("a study name is letters, digits, spaces and . _ : + - (at most 200)")
        return value

    @field_validator("knobs", mode="before")
    @classmethod
    def _split_knobs(cls, value: object) -> object:
        if isinstance(value, str):
            value = [v for v in value.split(",")]
        if isinstance(value, (list, tuple)):
            return tuple(
                dict.fromkeys(KNOB_ALIASES.get(str(v).strip(), str(v).strip()) for v in value if str(v).strip())
            )
        return value

    @field_validator("values", "exclude", "pin", mode="before")
    @classmethod
    def _alias_keys(cls, value: object) -> object:
        if isinstance(value, dict):
            return {KNOB_ALIASES.get(k, k): v for k, v in value.items()}
        return value

    @field_validator("objectives")
    @classmethod
    def _check_objectives(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Each objective as its metric key (stored definitions with older spellings read the same)."""
        if not 1 <= len(value) <= 2:
            raise ValueError("give one objective, or two for a Pareto study (e.g. tpot_ms_p50,ppl_increase_pct)")
        return tuple(objective_key(name) for name in value)

    @model_validator(mode="after")
    def _check_study(self) -> StudyDefinition:
        fields = type(self.base.recipe).model_fields
        named = {*self.knobs, *self.values, *self.exclude, *self.pin}
        unknown = sorted(k for k in named if k not in fields or k == "engine")
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)}: not a knob of engine {self.base.recipe.engine} "
                "(list them: python -m engine knobs)"
            )
        if not self.knobs:
            raise ValueError("name the knobs to search, e.g. dtype,quantization,attention")
        both = sorted(set(self.knobs) & set(self.pin))
        if both:
            raise ValueError(f"{', '.join(both)}: a knob is either searched or pinned, not both")
        if self.needs_accuracy and not self.base.model.has_accuracy:
            raise ValueError("synthetic weights have no accuracy: drop the accuracy constraints and objectives")
        if self.constraints.min_task_accuracy is not None and not self.base.quality.tasks:
            raise ValueError("min_task_accuracy needs a task in the base spec's quality metrics (task:NAME)")
        self.effective_base()  # raises with the spec's own words
        return self

    @property
    def objective_keys(self) -> tuple[str, ...]:
        return tuple(objective_key(name) for name in self.objectives)

    @property
    def directions(self) -> tuple[str, ...]:
        """Optuna's directions, one per objective."""
        return tuple("minimize" if minimise(k) else "maximize" for k in self.objective_keys)

    @property
    def needs_accuracy(self) -> bool:
        return bool(self.quality_metrics()) or bool(self.base.quality.tasks)

    def quality_metrics(self) -> tuple[str, ...]:
        """Accuracy metrics every trial measures: the constraints' and objectives' needs, then the base's own."""
        needed = list(self.constraints.quality_metrics())
        keys = self.objective_keys
        if PPL_INCREASE in keys:
            needed.append("ppl")
        if "quality.kl_mean" in keys:
            needed.append("fidelity")
        return tuple(dict.fromkeys([*needed, *self.base.quality.metrics]))

    def quality_keys(self) -> tuple[str, ...]:
        """Keys a reused run's accuracy must hold (``perplexity``, ``kl_mean``, ``task:NAME``)."""
        words = {"ppl": "perplexity", "fidelity": "kl_mean"}
        return tuple(words.get(m, m) for m in self.quality_metrics())

    def effective_base(self) -> JobSpec:
        """The base spec with the pinned knobs set and the accuracy phase every trial needs; SpecError."""
        data = self.base.model_dump(mode="json")
        fields = type(self.base.recipe).model_fields
        data["recipe"].update({k: knob_value(fields[k].annotation, k, v) for k, v in self.pin.items()})
        metrics = self.quality_metrics()
        if metrics:
            data["quality"] = {**data.get("quality", {}), "metrics": list(metrics)}
        data["name"] = None
        try:
            return parse_job_spec(data)
        except SpecError as exc:
            raise ValueError(f"the base recipe cannot run: {exc}") from exc


def parse_definition(data: JSONMapping) -> StudyDefinition:
    """Validate a study definition; SpecError with one line."""
    from pydantic import ValidationError

    from engine.spec import format_validation_error

    try:
        return StudyDefinition.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc)) from exc
