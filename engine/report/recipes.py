"""Recipes in words, and what differs between two runs besides their recipe.

Works on run-like objects with ``spec`` (the job spec as a dict), ``engine`` and
``device_name`` (storage's RunDetail, :class:`engine.report.runlike.RunLike`); every field may be missing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject, JSONValue
from engine.spec.sources.flat import stored_traffic
from engine.spec.workload import flat_workload

if TYPE_CHECKING:
    from engine.report.runlike import RunLike


@lru_cache(maxsize=32)
def _class_defaults(cls: type) -> tuple[tuple[str, object], ...]:
    fields = cls.model_fields  # type: ignore[attr-defined]
    return tuple((name, f.get_default(call_default_factory=True)) for name, f in fields.items() if not f.is_required())


def _recipe_defaults(engine: str) -> tuple[tuple[str, object], ...]:
    """The knob defaults of a registered engine's recipe (none for an engine no longer registered)."""
    from engine.spec import engines

    descriptor = engines.find(engine)
    return _class_defaults(descriptor.recipe) if descriptor else ()


def changed_recipe_knobs(recipe: JSONMapping | None) -> JSONObject:
    """The recipe's knobs that differ from the engine's defaults (``engine`` itself left out)."""
    recipe = dict(recipe or {})
    engine = str(recipe.pop("engine", ""))
    defaults = dict(_recipe_defaults(engine))
    return {k: v for k, v in recipe.items() if k not in defaults or defaults[k] != v}


def recipe_in_words(spec: JSONMapping | None, engine: str | None = None) -> str:
    """``transformers · dtype bfloat16 · attn sdpa · batch 8 · 128→32 tokens × 8 requests · cpu``.

    Only knobs that differ from the engine's defaults are named.
    """
    spec = spec or {}
    recipe = dict(spec.get("recipe") or {})
    workload = flat_workload(spec.get("workload"))
    parts = [str(recipe.get("engine") or engine or "?"), knobs_listed(changed_recipe_knobs(recipe))]
    if workload:
        parts.append(f"batch {workload.get('batch_size', 1)}")
        parts.extend(traffic_words(workload))
    if spec.get("device"):
        parts.append(str(spec["device"]))
    return " · ".join(parts)


def knobs_listed(changed: JSONMapping | None) -> str:
    """``dtype bfloat16 · attn sdpa`` for knobs changed from the defaults; ``defaults`` for none."""
    words = []
    for key, value in sorted((changed or {}).items()):
        if value is None:
            continue
        short = {"attn_implementation": "attn"}.get(key, key.replace("_", " "))
        words.append(short if value is True else f"{short} {value}")
    return " · ".join(words) or "defaults"


def traffic_words(w: JSONMapping) -> list[str]:
    """A flat workload's traffic in a few words, as its source names itself (``trace t.jsonl ×10 · ≤500 rows``,
    ``dataset chat.json × 50 req``, ``sessions of chat.json × 40 turns``, ``128-token prompts → 32 × 8 req``),
    then ``cancel 10 %``: a file by its base name, never a path or a hash."""
    traffic = stored_traffic(w)
    requests = w.get("requests", "?")
    count = f"{requests:,}" if isinstance(requests, int) else str(requests)
    if traffic is None:
        parts = [f"? × {count} req"]
    elif traffic.scheduled:
        cap = traffic.default_requests
        parts = [traffic.title(), *([f"≤{count} rows"] if isinstance(requests, int) and cap and requests < cap else [])]
    elif traffic.sessions:
        parts = [f"{traffic.title()} × {count} turns"]
    elif traffic.own_output_lengths():
        parts = [f"{traffic.title()} × {count} req"]
    else:
        parts = [f"{traffic.title()} → {w.get('output_tokens', '?')} × {count} req"]
    if w.get("cancel_rate"):
        parts.append(f"cancel {w['cancel_rate']:.0%}".replace("%", " %"))
    return parts


def workload_words(workload: JSONMapping | None) -> str:
    """``128-token prompts → 32 × 8 req · batch 4 · poisson 2 req/s``: the traffic (:func:`traffic_words`), then
    what is not plain; the workload flat (a stored run's knobs) or as stored."""
    w = flat_workload(workload)
    parts = traffic_words(w)
    if w.get("batch_size") not in (None, 1):
        parts.append(f"batch {w['batch_size']}")
    if w.get("arrival") not in (None, "batch"):
        rate = f" {w['rate']:g} req/s" if isinstance(w.get("rate"), (int, float)) else ""
        parts.append(f"{w['arrival']}{rate}")
    if w.get("max_concurrency"):
        parts.append(f"≤{w['max_concurrency']} in flight")
    return " · ".join(parts)


def _knobs(spec: JSONMapping | None) -> JSONObject:
    spec = spec or {}
    knobs: JSONObject = {"model": (spec.get("model") or {}).get("source"), "device": spec.get("device")}
    knobs.update(dict((spec.get("recipe") or {}).items()))
    knobs.update(flat_workload(spec.get("workload")))
    return knobs


def spec_difference(spec: JSONMapping | None, baseline_spec: JSONMapping | None) -> str:
    """The knobs where a spec differs from the baseline's, e.g. ``dtype bfloat16, batch_size 8``."""
    mine, base = _knobs(spec), _knobs(baseline_spec)
    diffs = [f"{k} {mine.get(k)}" for k in sorted(set(mine) | set(base)) if mine.get(k) != base.get(k)]
    return ", ".join(diffs)


def run_label(run: RunLike, baseline: RunLike | None = None) -> str:
    """How a run is called in a comparison: its name, else what differs from the baseline."""
    if getattr(run, "name", None):
        return str(run.name)
    if baseline is not None and baseline is not run:
        diff = spec_difference(getattr(run, "spec", None), getattr(baseline, "spec", None))
        if diff:
            return diff
    return f"run {run.id}"


# Accuracy settings that make two runs' perplexity (or task scores) incomparable when they differ.
_ACCURACY_SETTINGS: tuple[str, ...] = ("corpus", "budget_tokens", "window", "stride", "task_limit")


def _workload_order(field: str) -> tuple[int, str]:
    """Flat workload fields in their declared order: the traffic's (prompt tokens ...), then output tokens,
    requests, ..."""
    from engine.spec import Workload
    from engine.spec.sources.base import LEGACY_FLAT_DEFAULTS

    names = [*LEGACY_FLAT_DEFAULTS, *Workload.model_fields]
    return (names.index(field) if field in names else len(names), field)


def _context(run: RunLike) -> JSONObject:
    """What a run measured besides its recipe: model, engine, device, hardware, workload, accuracy settings."""
    spec = getattr(run, "spec", None) or {}
    out: JSONObject = {
        "model": (spec.get("model") or {}).get("source"),
        "engine": (spec.get("recipe") or {}).get("engine") or getattr(run, "engine", None),
        "device": spec.get("device") or getattr(run, "device", None),
        "hardware": getattr(run, "device_name", None),
    }
    workload = flat_workload(spec.get("workload"))
    out.update({k.replace("_", " "): workload[k] for k in sorted(workload, key=_workload_order)})
    quality = spec.get("quality") or {}
    if quality.get("metrics"):
        out.update({f"accuracy {k.replace('_', ' ')}": quality.get(k) for k in _ACCURACY_SETTINGS})
    return out


# Workload fields that say where the requests come from: one "traffic" line when the sources differ.
_SOURCE_KEYS = frozenset(
    k.replace("_", " ")
    for k in (
        "prompt_tokens", "prompt_file", "dataset", "dataset_format", "dataset_column", "multi_turn", "trace",
        "trace_format", "time_scale", "source_sha256", "prefix_count", "prefix_tokens", "requests",
    )
)  # fmt: skip


def _source_kind(workload: JSONMapping) -> tuple[str, str | None]:
    """(which request source, its input): two runs of different sources or files had different traffic."""
    traffic = stored_traffic(workload)
    if traffic is None:
        return "?", None
    return traffic.source, traffic.content_hash() or traffic.input_path()


def _traffic_line(run: RunLike, baseline: RunLike) -> str | None:
    """``traffic trace mooncake ×10 (baseline 128→32 × 8 req)`` when the two runs' request sources differ."""
    mine = flat_workload((getattr(run, "spec", None) or {}).get("workload"))
    base = flat_workload((getattr(baseline, "spec", None) or {}).get("workload"))
    if _source_kind(mine) == _source_kind(base):
        return None
    return f"traffic {' · '.join(traffic_words(mine))} (baseline {' · '.join(traffic_words(base))})"


def context_differences(run: RunLike, baseline: RunLike | None) -> list[str]:
    """What differs from the baseline besides the recipe, e.g. ``["prompt tokens 16 (baseline 64)"]``.

    Engine, model, device, hardware and every workload field count: a ratio between runs that
    differ in any of them is not the recipe's alone. Accuracy settings count when both measured accuracy.
    Runs whose requests came from different sources (a trace and synthetic prompts, two files) get one
    ``traffic ...`` line first, in words, instead of a line per source field.
    """
    if baseline is None or baseline is run:
        return []
    mine, base = _context(run), _context(baseline)
    traffic = _traffic_line(run, baseline)
    out = [traffic] if traffic else []
    for key in dict.fromkeys([*mine, *base]):
        if traffic and key in _SOURCE_KEYS:
            continue
        if key.startswith("accuracy ") and (key not in base or key not in mine):
            continue
        if key == "hardware" and (mine[key] is None or base.get(key) is None):
            continue
        if mine.get(key) != base.get(key):
            out.append(f"{key} {_word(mine.get(key))} (baseline {_word(base.get(key))})")
    return out


def _word(value: object) -> str:
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


# How the workload fields that workload_words leaves out are said in a label (never a field name, a hash or a path).
_FIELD_WORDS: dict[str, Callable[[JSONValue], str | None]] = {
    "source_output_lengths": lambda v: None if v else "fixed output lengths",
    "trace_start_s": lambda v: f"from {v:g} s" if v else None,
    "trace_duration_s": lambda v: f"{v:g} s window",
    "min_prompt_tokens": lambda v: f"prompts ≥{v} tok",
    "max_prompt_tokens": lambda v: f"prompts ≤{v} tok",
    "strict_lengths": lambda v: "strict lengths" if v else None,
    "dataset_column": lambda v: f"column {v}",
    "cancel_after_ms": lambda v: f"cancel after {v:g} ms",
    "ignore_eos": lambda v: None if v else "stops at EOS",
    "seed": lambda v: f"seed {v}",
    "burstiness": lambda v: f"burstiness {v:g}",
    "prompt_length": lambda v: f"{v} prompt lengths",
    "prompt_length_spread": lambda v: f"spread {v:g}",
    "source_sha256": lambda v: None,  # the file's content: in the run's identity, never in words
}
_FILE_FIELDS = ("trace", "dataset", "prompt_file")


def _whole(value: JSONValue) -> JSONValue:
    """A float holding a whole number (a frame column with gaps) as an int: ``16``, never ``16.0``."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def workload_label(fields: JSONMapping, defaults: JSONMapping | None = None) -> str:
    """What a run sent, in a few words for a legend or a warning: ``trace mooncake ×10 · conv.jsonl · 20 s
    window``; a file by its name only, no hash, no field names, whole numbers as integers. ``fields`` are the
    workload's (off their ``defaults``: those equal to a default are not said)."""
    from engine.spec.forms import label

    defaults = defaults or {}
    w = {k: _whole(v) for k, v in fields.items()}
    parts = [workload_words({**w, "requests": "n"}).replace(" × n req", "").replace(" × n turns", "")]
    # the source's own title names its file (by its base name) and scale: nothing more to say of the file
    said = {"prompt_tokens", "output_tokens", "batch_size", "arrival", "rate", "max_concurrency", "requests",
            "trace_format", "time_scale", "dataset_format", "multi_turn", "think_time_s", "prefix_count",
            "prefix_tokens", "cancel_rate", *_FILE_FIELDS}  # fmt: skip
    for key in sorted(k for k in w if k not in said and w[k] is not None and w[k] != defaults.get(k, object())):
        words = _FIELD_WORDS[key](w[key]) if key in _FIELD_WORDS else f"{label(key).lower()} {w[key]}"
        if words:
            parts.append(words)
    return " · ".join(p for p in parts if p)
