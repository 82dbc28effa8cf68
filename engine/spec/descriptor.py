"""What an engine is, as data: :class:`EngineDescriptor` and its small parts (pure).

Each engine package (``engine/backends/<engine>/descriptor.py``) holds one instance per
engine it offers; :mod:`engine.spec.engines` lists them, one line each. Everything outside
the package that needs to know something about an engine reads it here: the Launch form and
``python -m engine knobs`` (:class:`FormGroups`), the CLI's ``--engine`` choices, storage's
knob columns (the recipe class), pre-flight (the ``preflight`` target), the load driver, the
profile and accuracy phases (:class:`Capabilities`), the what-if estimator (:class:`WhatIf`),
recipe studies (:class:`Search`), fingerprints, presets and provenance. Nothing here imports
the engine's heavy modules: ``backend`` and ``preflight`` are ``"module:name"`` strings,
imported when a job needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from engine.jsonvalue import JSONObject, JSONScalar, JSONValue
from engine.spec.recipes import EngineRecipe
from engine.spec.rules import Dependency

UNKNOWN_FAMILY = "unknown"  # the what-if family of an engine the estimator does not model
FACTOR_NAMES = ("eff_bandwidth", "eff_compute_prefill", "eff_compute_decode", "step_overhead_ms", "prefill_overhead_ms")


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do, as the code outside its package asks it.

    ``serving``: it streams requests and serves many at once, so the load driver
    (``engine/run/driver.py``) drives every job of it, concurrent requests included.
    ``profiles``: the model runs in the job's own process, so ``torch.profiler`` can profile
    its decode steps. ``full_distributions``: its ``score`` gives the whole next-token
    distribution (KL against a baseline). ``server_metrics``: it is measured through a
    server whose Prometheus ``/metrics`` the job reads. ``remote``: that server is not the
    job's (no local device, no memory figure). ``tensor_parallel``: the job itself launches
    one process per rank (:meth:`EngineRecipe.world_size`). ``client_processes``: its requests
    leave the process (HTTP to a server), so several client processes can send them
    (``workload.client_processes``, :mod:`engine.run.sending`). ``runs_per_load``: one load serves
    several runs of one recipe (a sweep's points, :mod:`engine.jobs.sweep`), what a run leaves behind
    for the next (a prefix cache) emptied between them by :meth:`Backend.between_runs`.
    """

    serving: bool = False
    profiles: bool = False
    full_distributions: bool = False
    server_metrics: bool = False
    remote: bool = False
    tensor_parallel: bool = False
    client_processes: bool = False
    runs_per_load: bool = False


@dataclass(frozen=True)
class FormGroups:
    """How the Launch form shows the knobs (``python -m engine knobs`` lists the same choices).

    ``basic``: the knobs shown at once (the others sit in "Advanced"). ``shown_with``: knobs
    shown only when the form's values say so, beyond the knob dependencies (the values
    carry the device as ``"_device"``). ``labels``: each knob in words, with its unit.
    ``device_choices``: say, for every closed-choice knob, which values a device can run
    and why not the others (:func:`engine.spec.forms.options`); ``enablers`` are set beside
    a knob moved from its default for that check, ``companions`` beside one value of a knob
    (``speculative=assistant`` needs an ``assistant_model``).
    """

    basic: tuple[str, ...] = ()
    shown_with: tuple[Dependency, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    device_choices: bool = False
    enablers: Mapping[str, Mapping[str, JSONValue]] = field(default_factory=lambda: MappingProxyType({}))
    companions: Mapping[tuple[str, JSONScalar], Mapping[str, JSONValue]] = field(
        default_factory=lambda: MappingProxyType({})
    )


@dataclass(frozen=True)
class Search:
    """What a recipe study searches by default: the knobs the Optimize page proposes, and candidate values
    of the knobs whose values are not a closed set (numbers, optional numbers)."""

    knobs: tuple[str, ...] = ()
    values: Mapping[str, tuple[JSONScalar, ...]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ServingModel:
    """How the serving simulator (engine/whatif/serving) models the engine's server.

    ``batching``: ``continuous`` (vLLM's scheduler: running requests first, a token budget, chunked prefill) or
    ``static`` (one batch at a time to its end, as ``model.generate`` serves). ``priors``: device kind -> step
    cost (``engine.whatif.serving.StepCosts`` field) -> value, the documented costs used until measured runs
    calibrate them. ``modelled``: knob values the model assumes (a recipe with another is not modelled).
    ``speculative_knob``: the recipe's speculative-decoding knob the simulator reads, where it models one.
    ``tp_knob``: the knob a prediction's tensor parallelism replaces (``--tp`` decides it instead).
    """

    batching: Literal["continuous", "static"]
    priors: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    modelled: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    speculative_knob: str | None = None
    tp_knob: str | None = None


@dataclass(frozen=True)
class WhatIf:
    """How the what-if estimator models the engine.

    ``family``: the estimator's model of it (engines sharing one share calibration and
    priors; :data:`UNKNOWN_FAMILY`: not modelled). ``priors``: device kind (``gpu``,
    ``cpu``) -> :data:`FACTOR_NAMES` -> value, the documented factors used until measured
    runs calibrate them (given by the engine the family is named after). ``calibrates``:
    whether its measured runs calibrate the family; ``left_out`` says why not, in words
    ("served over HTTP").
    """

    family: str = UNKNOWN_FAMILY
    priors: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    calibrates: bool = True
    left_out: str = "no what-if model"
    serving: ServingModel | None = None  # how the serving simulator models it (None: it does not)

    def __post_init__(self) -> None:
        for kind, factors in self.priors.items():
            if set(factors) != set(FACTOR_NAMES):
                raise ValueError(f"what-if priors on {kind} need exactly {', '.join(FACTOR_NAMES)}")


@dataclass(frozen=True)
class RecipePreset:
    """One named recipe: the engine, the knobs it sets (the rest at their defaults), what it is."""

    key: str
    name: str
    description: str
    recipe: Mapping[str, JSONValue]
    engine: str

    def recipe_data(self) -> JSONObject:
        """The recipe section of a job spec."""
        return {"engine": self.engine, **self.recipe}


@dataclass(frozen=True)
class EngineDescriptor:
    """Everything LatencyLab knows about one engine outside its backend, in one place.

    ``backend`` is the ``"module:Class"`` of its backend (imported only to run a job);
    ``preflight`` the ``"module:function"`` of its environment checks, run on the job's
    machine (``function(spec, runtime)`` raises :class:`~engine.spec.SpecError`; ``runtime``
    False skips the facts of this machine that only the job's own host can judge).
    ``fingerprint_defaults``: knobs that, at these values, are left out of the fingerprint
    (knobs added after runs were stored, so those runs keep theirs). ``packages``: the pip
    distributions worth naming in provenance; ``versions``: those that name the engine's
    software in a versions line (exports, the accuracy baseline's identity).
    """

    name: str
    recipe: type[EngineRecipe]
    summary: str
    backend: str
    preflight: str | None = None
    capabilities: Capabilities = Capabilities()
    knob_dependencies: tuple[Dependency, ...] = ()
    form: FormGroups = FormGroups()
    search: Search = Search()
    whatif: WhatIf = WhatIf()
    fingerprint_defaults: Mapping[str, JSONValue] = field(default_factory=lambda: MappingProxyType({}))
    presets: tuple[RecipePreset, ...] = ()
    packages: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        fields = self.recipe.model_fields
        if "engine" not in fields or fields["engine"].default != self.name:
            raise ValueError(f"engine {self.name!r}: its recipe class's engine field must default to {self.name!r}")
        knobs = {
            *(k for k, _, _ in self.knob_dependencies),
            *self.form.basic,
            *(k for k, _, _ in self.form.shown_with),
            *self.fingerprint_defaults,
            *self.search.knobs,
        }
        unknown = sorted(k for k in knobs if k not in fields or k == "engine")
        if unknown:
            raise ValueError(f"engine {self.name!r} names knobs its recipe does not have: {', '.join(unknown)}")
        for target in (self.backend, self.preflight):
            if target is not None and target.count(":") != 1:
                raise ValueError(f"engine {self.name!r}: {target!r} is not 'module:name'")
        if any(p.engine != self.name for p in self.presets):
            raise ValueError(f"engine {self.name!r}: its presets must be recipes of this engine")
        if not set(self.versions) <= set(self.packages):
            raise ValueError(f"engine {self.name!r}: versions must be among its packages")
