"""Forms built from the rules: which values of each knob a device can run, and why not the others;
the knobs in words (:func:`label`), which ones show at once (:func:`is_basic`), and which are hidden
because nothing uses them (:func:`hidden_fields`, from the spec's own dependencies).

A section is ``"workload"`` or an engine's name: the workload's groups are here, every engine's
in its descriptor (``FormGroups``, :mod:`engine.spec.descriptor`), found through
:mod:`engine.spec.engines`.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError

from engine.spec import engines
from engine.spec.rules import unused_knobs
from engine.spec.traffic import TRAFFIC_LABELS


def option_reason(engine: str, field_name: str, value: Any, device: str) -> str | None:
    """Why ``field_name=value`` of ``engine``'s recipe (other knobs at their defaults) cannot run on ``device``;
    None when it can."""
    descriptor = engines.get(engine)
    form, cls = descriptor.form, descriptor.recipe
    base: dict[str, Any] = {field_name: value}
    if value != cls.model_fields[field_name].default:
        base.update(form.enablers.get(field_name, {}))
    base.update(form.companions.get((field_name, value), {}))
    try:
        recipe = cls(**base)
    except ValidationError as exc:
        return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
    problems = recipe.job_problems(device)
    return "; ".join(problems) if problems else None


def options(engine: str, device: str) -> dict[str, dict[Any, str | None]]:
    """Every Literal/bool knob of ``engine``'s recipe: value -> None (can run) or the reason it cannot.

    Empty for an engine whose form does not offer per-device choices (``FormGroups.device_choices``)."""
    descriptor = engines.get(engine)
    if not descriptor.form.device_choices:
        return {}
    out: dict[str, dict[Any, str | None]] = {}
    for name, info in descriptor.recipe.model_fields.items():
        if name == "engine":
            continue
        values: tuple[Any, ...] = (False, True) if info.annotation is bool else get_args(info.annotation)
        if not values or not all(isinstance(v, str | bool | int) for v in values):
            continue
        out[name] = {v: option_reason(engine, name, v, device) for v in values}
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
    **TRAFFIC_LABELS,
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
WORKLOAD_SHOWN_WITH: tuple[tuple[str, Any, str], ...] = (
    ("burstiness", lambda v: v["arrival"] == "gamma", "arrival=gamma"),
    ("batch_size", lambda v: v["arrival"] == "batch", "arrival=batch"),
    ("prompt_tokens", lambda v: v["prompt_file"] is None, "no prompt file"),
    ("prompt_length", lambda v: v["prompt_file"] is None, "no prompt file"),
    *(
        (k, lambda v: v["until_ci_pct"] is not None, "until_ci_pct")
        for k in ("until_metric", "max_requests", "max_seconds")
    ),
)
# What a hidden knob submits when that is not its default (a prompt file replaces the prompt length).
HIDDEN_VALUES: dict[tuple[str, str], Any] = {("workload", "prompt_tokens"): None}
# Optional knobs the form asks as plain values (no "set" box): their None is said by another knob.
ALWAYS_SET: frozenset[tuple[str, str]] = frozenset({("workload", "prompt_tokens")})


# -- the traffic choice: which request source the workload form asks for, and only that source's fields --------
TRAFFIC_CHOICES: dict[str, str] = {
    "synthetic": "synthetic",
    "prompt_file": "prompt file",
    "dataset": "dataset",
    "sessions": "multi-turn sessions",
    "prefixes": "shared prefixes",
    "trace": "trace replay",
}
_SYNTHETIC = ("prompt_tokens", "prompt_length", "prompt_length_spread")
_DATASET = ("dataset", "dataset_format", "dataset_column", "min_prompt_tokens", "max_prompt_tokens")
TRAFFIC_FIELDS: dict[str, tuple[str, ...]] = {
    "synthetic": _SYNTHETIC,
    "prompt_file": ("prompt_file",),
    "dataset": (*_DATASET, "source_output_lengths"),
    "sessions": ("dataset", "dataset_format", "think_time_s", "source_output_lengths"),
    "prefixes": (*_SYNTHETIC, "prefix_count", "prefix_tokens"),
    "trace": ("trace", "trace_format", "time_scale", "trace_start_s", "trace_duration_s", "source_output_lengths"),
}
# Every field some choice owns (hidden, at its default, under the other choices), and what a choice fixes.
SOURCE_FIELDS: frozenset[str] = frozenset({f for fs in TRAFFIC_FIELDS.values() for f in fs} | {"multi_turn"})
TRAFFIC_FORCED: dict[str, dict[str, Any]] = {"sessions": {"multi_turn": True}}
TRAFFIC_START: dict[str, dict[str, Any]] = {"prefixes": {"prefix_count": 4, "prefix_tokens": 512}}
# A trace keeps its own schedule: the arrival process's fields stay at their defaults.
_SCHEDULED = ("arrival", "rate", "burstiness", "batch_size", "max_concurrency")


def traffic_of(values: dict[str, Any]) -> str:
    """The traffic choice that reads a workload's values (a link's, a stored run's)."""
    if values.get("trace"):
        return "trace"
    if values.get("dataset"):
        return "sessions" if values.get("multi_turn") else "dataset"
    if values.get("prompt_file"):
        return "prompt_file"
    return "prefixes" if values.get("prefix_count") else "synthetic"


def traffic_hidden(traffic: str | None) -> dict[str, str]:
    """Workload fields the traffic choice leaves out -> the choice that shows them (none without a choice)."""
    if traffic is None:
        return {}
    keep = TRAFFIC_FIELDS[traffic]
    out = {f: f"another traffic source than {TRAFFIC_CHOICES[traffic]}" for f in SOURCE_FIELDS if f not in keep}
    if traffic == "trace":
        out.update({f: "a source without its own schedule" for f in _SCHEDULED})
    return out


def label(name: str) -> str:
    """The knob in words with its unit ("TTFT SLO (ms)"); its name with spaces when no section names it."""
    for labels in (WORKLOAD_LABELS, *(d.form.labels for d in engines.all_engines())):
        if name in labels:
            return labels[name]
    return name.replace("_", " ")


def is_basic(section: str, name: str, traffic: str | None = None) -> bool:
    """Whether the form shows ``name`` at once (else in its "Advanced" expander); the fields of the traffic
    source chosen show at once."""
    if section == "workload":
        return name in WORKLOAD_BASIC or name in TRAFFIC_FIELDS.get(traffic or "", ())
    descriptor = engines.find(section)
    return descriptor is not None and name in descriptor.form.basic


def _shown_with(section: str) -> tuple[tuple[str, Any, str], ...]:
    if section == "workload":
        return WORKLOAD_SHOWN_WITH
    descriptor = engines.find(section)
    return descriptor.form.shown_with if descriptor else ()


def hidden_fields(
    section: str, values: dict[str, Any], device: str = "cpu", traffic: str | None = None
) -> dict[str, str]:
    """Knobs of ``section`` (an engine name or 'workload') the other ``values`` leave unused -> what would use
    them; the form hides those (and submits their defaults). ``values`` hold every field of the section;
    ``traffic`` (a :data:`TRAFFIC_CHOICES` key) hides the workload fields of the other request sources."""
    out = dict(unused_knobs(engines.knob_dependencies(section), values))
    if section == "workload":
        out.update(traffic_hidden(traffic))
    context = {**values, "_device": device}
    for knob, shown, enabler in _shown_with(section):
        try:
            if not shown(context):
                out.setdefault(knob, enabler)
        except (KeyError, TypeError):  # a malformed value: validation names it
            continue
    return out
