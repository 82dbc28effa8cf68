"""Knobs that only matter with another knob, for every section of a spec (pure).

A :data:`Dependency` says that a knob is used only when the section's other values say so
(``gptq_bits`` with ``quantization=gptq``, ``rate`` with a Poisson arrival).
:func:`unused_knob_problems` refuses such a knob set away from its default where nothing
uses it (it would be ignored, yet change the fingerprint), :mod:`engine.spec.sweep` resets
it on the grid points that do not use it, and :mod:`engine.spec.forms` hides it.

The workload's dependencies are here (:data:`WORKLOAD_DEPENDENCIES`); each engine's are in
its package (``engine/backends/<engine>/rules.py``), named by its descriptor, with the rest
of what that engine's device kinds can run. :func:`engine.spec.engines.knob_dependencies`
finds those of a section by name. Facts known only on the machine that runs a job (GPU
compute capability, installed packages) are judged by each engine's pre-flight.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

# (knob, whether the section's other values use it, what would enable it); the values are a section's fields
# (a spec's, or a form's as typed: any Python value)
Dependency = tuple[str, Callable[[Mapping[str, object]], bool], str]

WORKLOAD_DEPENDENCIES: tuple[Dependency, ...] = (
    ("rate", lambda w: w["arrival"] in ("poisson", "gamma"), "arrival=poisson or gamma"),
    (
        "max_concurrency",
        lambda w: w["arrival"] != "batch",
        "arrival=concurrency, poisson, gamma or max (arrival=batch sends batch_size requests at a time)",
    ),
)


def unused_knobs(dependencies: Sequence[Dependency], values: Mapping[str, object]) -> list[tuple[str, str]]:
    """(knob, what enables it) for every knob of ``dependencies`` that the other ``values`` (every field of the
    section) leave unused."""
    return [(knob, enabler) for knob, used, enabler in dependencies if not used(values)]


def unused_knob_problems(
    dependencies: Sequence[Dependency], values: Mapping[str, object], defaults: Mapping[str, object]
) -> list[str]:
    """One message per knob set away from its default where nothing uses it."""
    return [
        f"{knob} is only used with {enabler}"
        for knob, enabler in unused_knobs(dependencies, values)
        if values[knob] != defaults[knob]
    ]
