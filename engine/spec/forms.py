"""Forms built from the rules: which values of each knob a device can run, and why not the others;
the knobs in words (:func:`label`), which ones show at once (:func:`is_basic`), and which are hidden
because nothing uses them (:func:`hidden_fields`, from the spec's own dependencies).

A section is ``"workload"`` or an engine's name: the workload's groups are here, every engine's
in its descriptor (``FormGroups``, :mod:`engine.spec.descriptor`), found through
:mod:`engine.spec.engines`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

from pydantic import ValidationError

from engine.jsonvalue import JSONMapping, JSONObject
from engine.spec import engines, sources
from engine.spec.rules import Dependency, unused_knobs
from engine.spec.sources.base import TrafficSource
from engine.spec.sources.flat import source_of

# A value of a closed-choice knob (a Literal's or a bool's), one of the form's choices.
Choice = str | bool | int


def option_reason(engine: str, field_name: str, value: Choice, device: str) -> str | None:
    """Why ``field_name=value`` of ``engine``'s recipe (other knobs at their defaults) cannot run on ``device``;
    None when it can."""
    descriptor = engines.get(engine)
    form, cls = descriptor.form, descriptor.recipe
    base: JSONObject = {field_name: value}
    if value != cls.model_fields[field_name].default:
        base.update(form.enablers.get(field_name, {}))
    base.update(form.companions.get((field_name, value), {}))
    try:
        recipe = cls(**base)
    except ValidationError as exc:
        return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
    problems = recipe.job_problems(device)
    return "; ".join(problems) if problems else None


def options(engine: str, device: str) -> dict[str, dict[Choice, str | None]]:
    """Every Literal/bool knob of ``engine``'s recipe: value -> None (can run) or the reason it cannot.

    Empty for an engine whose form does not offer per-device choices (``FormGroups.device_choices``)."""
    descriptor = engines.get(engine)
    if not descriptor.form.device_choices:
        return {}
    out: dict[str, dict[Choice, str | None]] = {}
    for name, info in descriptor.recipe.model_fields.items():
        if name == "engine":
            continue
        values: tuple[object, ...] = (False, True) if info.annotation is bool else get_args(info.annotation)
        choices = [v for v in values if isinstance(v, str | bool | int)]
        if not values or len(choices) < len(values):
            continue
        out[name] = {v: option_reason(engine, name, v, device) for v in choices}
    return out


# -- labels, groups and dependencies of the workload's form (each engine's are in its descriptor) ----------
# Words with units for every field of the workload; an engine's knobs are in words in its descriptor.
WORKLOAD_LABELS: dict[str, str] = {
    "prompt_tokens": "Prompt tokens",
    "prompt_file": "Prompt file",
    "output_tokens": "Output tokens",
    "requests": "Requests",
    "batch_size": "Batch size",
    "warmup_requests": "Warm-up requests",
    "ignore_eos": "Ignore end of sequence (fixed output length)",
    "seed": "Random seed",
    "arrival": "Arrival",
    "rate": "Request rate (requests/s)",
    "burstiness": "Burstiness (gamma shape; 1 = Poisson)",
    "max_concurrency": "Max requests in flight",
    "prompt_length": "Prompt lengths",
    "prompt_length_spread": "Prompt length spread (0-1)",
    "slo_ttft_ms": "TTFT SLO (ms)",
    "slo_tpot_ms": "TPOT SLO (ms)",
    "slo_e2el_ms": "End-to-end latency SLO (ms)",
    "max_error_rate": "Max failed share (0-1)",
    "trials": "Trials",
    "until_ci_pct": "Measure until the 95 % CI is within (%)",
    "until_metric": "Metric the CI watches",
    "max_requests": "Most requests (adaptive)",
    "max_seconds": "Most seconds measured (adaptive)",
    "soak_minutes": "Soak: keep sending for (minutes)",
    "profile_steps": "Profile decode steps (0: off)",
    "client_processes": "Client processes (empty: chosen from the cores and the concurrency)",
    "load_nodes": "Load from Ray nodes (empty: this host only)",
    "traffic": "Traffic (the request source and its options)",
    "strict_lengths": "Refuse prompts beyond the context (else clip)",
    "cancel_rate": "Cancelled share (0-1)",
    "cancel_after_ms": "Cancel after (ms)",
}
# The workload fields shown at once; every other field of a section sits in the form's "Advanced" expander.
WORKLOAD_BASIC: tuple[str, ...] = (
    "prompt_tokens",
    "output_tokens",
    "requests",
    "arrival",
    "batch_size",
    "rate",
    "burstiness",
    "max_concurrency",
)
# Form-only dependencies, beyond the spec's (engine.spec.rules): (knob, shown when, what shows it).
# The device is in the values as "_device" ("cpu" or "cuda:...").
WORKLOAD_SHOWN_WITH: tuple[Dependency, ...] = (
    ("burstiness", lambda v: v["arrival"] == "gamma", "arrival=gamma"),
    ("batch_size", lambda v: v["arrival"] == "batch", "arrival=batch"),
    *(
        (k, lambda v: v["until_ci_pct"] is not None, "until_ci_pct")
        for k in ("until_metric", "max_requests", "max_seconds")
    ),
)


# -- the traffic choice: which request source the workload form asks for, and its options --------------
# A source's options are a form section of their own, named "source:<name>" (traffic_section); its labels,
# dependencies and first values are the source's own declarations (engine.spec.sources).
# A source with its own schedule: the arrival process's fields stay at their defaults.
_SCHEDULED = ("arrival", "rate", "burstiness", "batch_size", "max_concurrency")


def traffic_section(source: str) -> str:
    """The form section of a source's options (``source:trace``)."""
    return f"source:{source}"


def _source_of_section(section: str) -> type[TrafficSource] | None:
    return sources.find(section.removeprefix("source:")) if section.startswith("source:") else None


def traffic_choices() -> dict[str, str]:
    """Every registered source -> its choice in words, in registry order (the Launch page's traffic choice)."""
    return {sources.name_of(c): c.label for c in sources.all_sources()}


def traffic_of(values: JSONMapping) -> str:
    """The source a link's flat values name (``source=`` or its naming fields), the default one when they name
    none or several (the form then says what is wrong)."""
    try:
        return sources.name_of(source_of(values))
    except ValueError:
        return sources.names()[0]


def traffic_hidden(traffic: str | None) -> dict[str, str]:
    """Workload fields the chosen source leaves out -> why (a source with its own schedule: the arrival's)."""
    cls = sources.find(traffic)
    if cls is None or not cls.scheduled:
        return {}
    return {f: f"a source without its own schedule (the {cls.label} keeps its own)" for f in _SCHEDULED}


def label(name: str) -> str:
    """The knob in words with its unit ("TTFT SLO (ms)"); its name with spaces when no section names it."""
    for labels in (WORKLOAD_LABELS, sources.option_labels(), *(d.form.labels for d in engines.all_engines())):
        if name in labels:
            return labels[name]
    return name.replace("_", " ")


def is_basic(section: str, name: str) -> bool:
    """Whether the form shows ``name`` at once (else in its "Advanced" expander); a source's options show at
    once, but for its input file's hash (set when queued)."""
    if section == "workload":
        return name in WORKLOAD_BASIC
    if _source_of_section(section) is not None:
        return name != "source_sha256"
    descriptor = engines.find(section)
    return descriptor is not None and name in descriptor.form.basic


def dependencies(section: str) -> tuple[Dependency, ...]:
    """The knob dependencies of a form section: the workload's, a source's (``source:NAME``), an engine's."""
    cls = _source_of_section(section)
    return cls.dependencies if cls is not None else engines.knob_dependencies(section)


def _shown_with(section: str) -> tuple[Dependency, ...]:
    if section == "workload":
        return WORKLOAD_SHOWN_WITH
    descriptor = engines.find(section)
    return descriptor.form.shown_with if descriptor else ()


def hidden_fields(
    section: str, values: Mapping[str, object], device: str = "cpu", traffic: str | None = None
) -> dict[str, str]:
    """Knobs of ``section`` (an engine name or 'workload') the other ``values`` leave unused -> what would use
    them; the form hides those (and submits their defaults). ``values`` hold every field of the section;
    ``traffic`` (the chosen source's name) hides the arrival process's fields when it keeps its own schedule."""
    out = dict(unused_knobs(dependencies(section), values))
    if section == "workload":
        out.update(traffic_hidden(traffic))
    if _source_of_section(section) is not None:
        out["source_sha256"] = "the job's queueing (it hashes the file)"
    context = {**values, "_device": device}
    for knob, shown, enabler in _shown_with(section):
        try:
            if not shown(context):
                out.setdefault(knob, enabler)
        except (KeyError, TypeError):  # a malformed value: validation names it
            continue
    return out
