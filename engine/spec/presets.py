"""Named recipe presets: one-click starting points, each declared by its engine's descriptor (pure).

Each preset is an engine and the recipe knobs it sets away from that engine's defaults,
with a one-line description (:class:`~engine.spec.descriptor.RecipePreset`). Whether a
preset can run on a device (and a model kind) is never decided here: :func:`preset_problem`
builds the job spec and lets the spec's own rules say why not. The Launch page lists the
presets that can run first, greys the others with that reason, and fills its form with a
picked preset, so every knob stays editable.
"""

from __future__ import annotations

import re

from engine.jsonvalue import JSONMapping
from engine.spec import engines
from engine.spec.base import SpecError
from engine.spec.descriptor import RecipePreset
from engine.spec.job import parse_job_spec

__all__ = ["RecipePreset", "all_presets", "preset_by_key", "preset_of", "preset_problem", "presets_for"]
_LOCATION = re.compile(r"^recipe(\.[\w-]+)*: ")


def all_presets() -> tuple[RecipePreset, ...]:
    """Every registered engine's presets, in registry order."""
    return engines.presets()


def preset_by_key(key: str) -> RecipePreset | None:
    """The preset of that key, if any engine declares one."""
    return next((p for p in all_presets() if p.key == key), None)


def preset_problem(preset: RecipePreset, device: str, source: str = "demo") -> str | None:
    """Why ``preset`` cannot run on ``device`` with the model ``source`` (the spec's rules say); None when it can."""
    try:
        parse_job_spec({"model": {"source": source or "demo"}, "recipe": preset.recipe_data(), "device": device})
    except SpecError as exc:
        return _LOCATION.sub("", str(exc))
    return None


def presets_for(device: str, source: str = "demo") -> list[tuple[RecipePreset, str | None]]:
    """Every preset with the reason it cannot run here (None: it can); the runnable ones first, in toolbox order."""
    rated = [(p, preset_problem(p, device, source)) for p in all_presets()]
    return [r for r in rated if r[1] is None] + [r for r in rated if r[1] is not None]


def preset_of(recipe: JSONMapping) -> RecipePreset | None:
    """The preset whose knobs a recipe has exactly (the others at their defaults), if any."""
    engine = recipe.get("engine", engines.default().name)
    descriptor = engines.find(engine)
    if descriptor is None:
        return None
    defaults = descriptor.recipe.field_defaults()
    full = {**defaults, **{k: v for k, v in recipe.items() if k != "engine"}}
    return next((p for p in descriptor.presets if full == {**defaults, **p.recipe}), None)
