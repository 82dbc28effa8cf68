"""The engines LatencyLab knows: one line per engine naming its descriptor, and the lookups every caller uses.

An engine is one package, ``engine/backends/<engine>/``: its pure recipe, rules and
descriptor beside its heavy backend. Adding one is one line in :data:`_REGISTERED` (the
first line is the default engine); ARCHITECTURE.md's "How to add an engine" has the
checklist. This module imports the descriptor modules statically: they are pure (an
import-linter contract says so), and it is the only place the spec layer reaches into
``engine.backends``.

:data:`Recipe` is the type of ``JobSpec.recipe``: a before-validation that picks the class
of the engine the section names, among the engines registered now (a test can register a
fake one with :func:`register`), and dumps as that class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import SerializeAsAny, ValidationInfo, ValidatorFunctionWrapHandler, WrapValidator

from engine.backends.openai import descriptor as openai
from engine.backends.transformers import descriptor as transformers
from engine.backends.vllm import descriptor as vllm
from engine.spec.base import SpecError, validate_chosen
from engine.spec.descriptor import EngineDescriptor, RecipePreset
from engine.spec.recipes import EngineRecipe
from engine.spec.rules import WORKLOAD_DEPENDENCIES, Dependency

# One line per engine, in the order forms and choices list them; the first is the default engine.
_REGISTERED: list[EngineDescriptor] = [
    transformers.DESCRIPTOR,
    vllm.DESCRIPTOR,
    vllm.SERVER_DESCRIPTOR,
    openai.DESCRIPTOR,
]


def all_engines() -> tuple[EngineDescriptor, ...]:
    """Every registered engine's descriptor, in registry order."""
    return tuple(_REGISTERED)


def names() -> tuple[str, ...]:
    """Every registered engine's name, in registry order (the CLI's and the forms' choices)."""
    return tuple(d.name for d in _REGISTERED)


def default() -> EngineDescriptor:
    """The default engine: the first registered."""
    return _REGISTERED[0]


def find(name: object) -> EngineDescriptor | None:
    """The descriptor of engine ``name``, or None when no engine of that name is registered."""
    return next((d for d in _REGISTERED if d.name == name), None)


def unknown_engine(name: object) -> str:
    """The one line said for an engine name nobody registered."""
    return f"unknown engine {name!r}; available: {', '.join(names())}"


def get(name: object) -> EngineDescriptor:
    """The descriptor of engine ``name``; :class:`SpecError` naming the available ones when there is none."""
    found = find(name)
    if found is None:
        raise SpecError(unknown_engine(name))
    return found


def recipe_class(name: object) -> type[EngineRecipe]:
    """The recipe class of engine ``name`` (SpecError for an unknown engine)."""
    return get(name).recipe


def with_capability(capability: str) -> tuple[str, ...]:
    """The names of the engines that have ``capability`` (a field of :class:`~engine.spec.descriptor.Capabilities`)."""
    return tuple(d.name for d in _REGISTERED if getattr(d.capabilities, capability))


def knob_dependencies(section: str) -> tuple[Dependency, ...]:
    """The knob dependencies of a spec section: ``workload``'s, or those of the engine named ``section``."""
    if section == "workload":
        return WORKLOAD_DEPENDENCIES
    found = find(section)
    return found.knob_dependencies if found else ()


def presets() -> tuple[RecipePreset, ...]:
    """Every engine's recipe presets, engines in registry order."""
    return tuple(p for d in _REGISTERED for p in d.presets)


def packages(versions_only: bool = False) -> tuple[str, ...]:
    """The pip distributions the engines name (only their versions line with ``versions_only``), once each."""
    return tuple(dict.fromkeys(p for d in _REGISTERED for p in (d.versions if versions_only else d.packages)))


def register(descriptor: EngineDescriptor) -> None:
    """Add an engine at run time (tests register a fake one and remove it afterwards); ValueError if taken."""
    if find(descriptor.name) is not None:
        raise ValueError(f"engine {descriptor.name!r} is registered already")
    _REGISTERED.append(descriptor)


def unregister(name: str) -> None:
    """Remove an engine added with :func:`register`."""
    _REGISTERED[:] = [d for d in _REGISTERED if d.name != name]


# -- JobSpec.recipe: the class of the engine the section names ---------------------------------
def _validate_recipe(value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> EngineRecipe:
    """A recipe section as the class of the engine it names (a recipe object as it is)."""
    if isinstance(value, EngineRecipe):
        return value
    if not isinstance(value, Mapping):
        raise ValueError("Input should be a valid dictionary or object to extract fields from")
    if "engine" not in value:
        raise ValueError(f"give the engine: one of {', '.join(names())}")
    descriptor = find(value["engine"])
    if descriptor is None:
        raise ValueError(unknown_engine(value["engine"]))
    return validate_chosen(descriptor.recipe, value, descriptor.name, info.mode == "json")


Recipe = Annotated[SerializeAsAny[EngineRecipe], WrapValidator(_validate_recipe)]


def default_recipe() -> EngineRecipe:
    """The default engine's recipe, every knob at its default (``JobSpec``'s default)."""
    return default().recipe()
