"""The search space of a study (pure): the knobs valid for its device and engine, and trial specs.

Which values a knob may take comes from the engine's own rules: through the forms built from
them (:func:`engine.spec.forms.options`, for engines whose form offers per-device choices) and
the spec's own validators (every engine): a value the device cannot run is left out of the
space with the reason, and so is a value the base spec cannot take alone. A knob that only
matters with another one (the engine descriptor's knob dependencies: ``gptq_bits`` with
``quantization=gptq``, ``num_speculative_tokens`` with speculation) is suggested only when its
parent is set; otherwise it stays at its default. Open knobs (numbers) take the candidate
values the descriptor's ``Search`` gives, unless the study names its own. Combinations the
rules refuse are not known until a trial asks for one: :func:`trial_spec` builds the spec
with :func:`engine.spec.sweep.build_grid` (which puts unused knobs back to their defaults)
and validates it, and the driver prunes such a trial with the reason.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine.jsonvalue import JSONMapping, JSONObject
from engine.optimize.study import KnobValue, Params, StudyDefinition, knob_value
from engine.spec import JobSpec, SpecError, engines
from engine.spec.forms import options
from engine.spec.sweep import build_grid, field_axis, grid_specs


class Suggests(Protocol):
    """What a trial offers the space: Optuna's ``Trial.suggest_categorical``."""

    def suggest_categorical(self, name: str, choices: Sequence[KnobValue]) -> KnobValue: ...


@dataclass(frozen=True)
class Knob:
    """One searched knob: its values (the base's first), whether it depends on another, what was left out."""

    name: str
    values: tuple[KnobValue, ...]
    used: Callable[[JSONMapping], bool] | None = None  # None: always used
    enabler: str = ""
    left_out: tuple[tuple[KnobValue, str], ...] = ()


@dataclass(frozen=True)
class Space:
    """The knobs of a study with their values; suggests a trial's recipe and enumerates the grid."""

    base_recipe: JSONObject
    knobs: tuple[Knob, ...]

    def _fill(self, pick: Callable[[Knob], KnobValue]) -> Params:
        params: Params = {}
        for knob in [k for k in self.knobs if k.used is None] + [k for k in self.knobs if k.used is not None]:
            if knob.used is None or knob.used({**self.base_recipe, **params}):
                params[knob.name] = pick(knob)
        return params

    def suggest(self, trial: Suggests) -> Params:
        """A trial's recipe overrides, suggested knob by knob (dependent knobs only when their parent is set)."""
        return self._fill(lambda knob: trial.suggest_categorical(knob.name, list(knob.values)))

    def base_params(self) -> Params:
        """The base recipe's own values of the searched knobs: trial 0."""
        return self._fill(lambda knob: self.base_recipe[knob.name])

    def grid(self) -> list[Params]:
        """Every combination, dependent knobs expanded only where their parent is set (base first)."""
        independent = [k for k in self.knobs if k.used is None]
        dependent = [k for k in self.knobs if k.used is not None]
        out: list[Params] = []
        for combo in itertools.product(*(k.values for k in independent)):
            params = dict(zip((k.name for k in independent), combo, strict=True))
            recipe = {**self.base_recipe, **params}
            live = [k for k in dependent if k.used(recipe)]  # type: ignore[misc]
            for extra in itertools.product(*(k.values for k in live)):
                out.append({**params, **dict(zip((k.name for k in live), extra, strict=True))})
        return out

    def left_out(self) -> list[str]:
        """``quantization=bnb_nf4: needs a CUDA device`` for every value left out of the space."""
        return [f"{k.name}={value}: {why}" for k in self.knobs for value, why in k.left_out]


def _candidates(definition: StudyDefinition, name: str) -> tuple[KnobValue, ...]:
    """A knob's candidate values: the study's, else a closed set (Literal, bool), else the engine's (its ``Search``)."""
    info = type(definition.base.recipe).model_fields[name]
    searched = engines.get(definition.base.recipe.engine).search.values
    if name in definition.values:
        return _coerced(info.annotation, name, definition.values[name])
    if info.annotation is bool:
        return (False, True)
    literal = typing.get_args(info.annotation)
    if literal and all(isinstance(v, (str, int, bool)) for v in literal) and name not in searched:
        return tuple(literal)
    if name in searched:
        return searched[name]
    raise SpecError(f"knob {name} takes open values; give them, e.g. --values {name}=A,B")


def _coerced(annotation: object, name: str, values: tuple[object, ...]) -> tuple[KnobValue, ...]:
    """``values`` as the knob's type; SpecError naming a value it cannot take."""
    try:
        return tuple(knob_value(annotation, name, value) for value in values)
    except ValueError as exc:
        raise SpecError(str(exc)) from exc


def _one_knob_problem(base: JobSpec, name: str, value: KnobValue) -> str | None:
    """Why the base spec cannot take ``name=value`` alone (the spec's own validators), or None."""
    try:
        trial_spec(base, {name: value})
    except SpecError as exc:
        return str(exc).removeprefix(f"job 1 of 1 ({name}={value}): ")
    return None


def build_space(definition: StudyDefinition) -> Space:
    """The study's search space; SpecError when a searched knob has no value left."""
    base = definition.effective_base()
    recipe = base.recipe.model_dump(mode="json")
    engine = recipe["engine"]
    device_reasons = options(engine, base.device)  # empty where the engine's form has no per-device choices
    deps = {knob: (used, enabler) for knob, used, enabler in engines.knob_dependencies(engine)}
    knobs = []
    for name in definition.knobs:
        info = type(base.recipe).model_fields[name]
        excluded = _coerced(info.annotation, name, definition.exclude.get(name, ()))
        values: list[KnobValue] = [recipe[name]]
        left: list[tuple[KnobValue, str]] = []
        for value in _candidates(definition, name):
            if value in values or value in excluded:
                continue
            why = device_reasons.get(name, {}).get(value)
            if why is None and name not in deps:  # a dependent knob alone is always refused as unused
                why = _one_knob_problem(base, name, value)
            if why:
                left.append((value, why))
            else:
                values.append(value)
        if recipe[name] in excluded:
            raise SpecError(f"the base recipe's {name}={recipe[name]} is excluded; the base is always trial 0")
        used, enabler = deps.get(name, (None, ""))
        knobs.append(Knob(name, tuple(values), used, enabler, tuple(left)))
    return Space(base_recipe=recipe, knobs=tuple(knobs))


def check_searchable(space: Space, device: str) -> None:
    """SpecError naming a searched knob left with a single value (nothing to search) and why."""
    for knob in space.knobs:
        if len(knob.values) < 2:
            why = "; ".join(f"{v}: {r}" for v, r in knob.left_out) or "no other value given"
            raise SpecError(f"knob {knob.name} has a single value on {device} ({why})")


def trial_spec(base: JobSpec, params: Mapping[str, KnobValue], name: str | None = None) -> JobSpec:
    """The base spec with a trial's recipe overrides (unused dependent knobs back at their defaults),
    validated by the spec itself; SpecError with the reason when the combination cannot run."""
    data = base.model_dump(mode="json")
    if name:
        data["name"] = name
    axes = [field_axis("recipe", knob, [value]) for knob, value in params.items()]
    [spec] = grid_specs(build_grid(data, axes))
    return spec


def space_size(space: Space) -> int:
    """How many recipes the space holds (before combinations the rules refuse are pruned)."""
    return len(space.grid())
