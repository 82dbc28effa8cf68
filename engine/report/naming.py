"""How runs are named for people: the recipe in words, plus the run's number and the user's name.

One helper names a run everywhere (:func:`run_name`): the Run page's title, Compare's selectors,
summary, table and legends, History's series, the HTML report. The recipe is said as a preset's
name where it is one ("INT8 weight-only (torchao)"), else as its changed knobs in words
("drop 2 layers · bfloat16"), else "engine defaults"; the knobs' words are :func:`knob_value_words`.
A predicted run's name ends with where it was predicted (``run 14 · vllm-server defaults · predicted on
NVIDIA H100 SXM``), so every legend, selector, title and export says it. Compare's default baseline
(:func:`default_baseline`) is a measured run where there is one, the one whose recipe is its engine's defaults,
else the one with the fewest changed knobs, else the oldest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, TypeVar

from engine.jsonvalue import JSONMapping, JSONValue
from engine.report.predicted import predicted_on
from engine.report.recipes import changed_recipe_knobs
from engine.report.runlike import is_predicted
from engine.spec import sources
from engine.spec.sources.flat import stored_traffic
from engine.spec.workload import flat_workload

if TYPE_CHECKING:
    import pandas as pd

    from engine.report.runlike import RunLike

QUANTIZATION_WORDS = {
    "none": "no quantization",
    "torchao_int8_weight_only": "INT8 weight-only (torchao)",
    "torchao_int8_dynamic": "INT8 dynamic (torchao)",
    "torchao_int4_weight_only": "INT4 weight-only (torchao)",
    "torchao_float8": "FP8 (torchao)",
    "torch_dynamic_int8": "dynamic INT8 (torch)",
    "bnb_nf4": "NF4 (bitsandbytes)",
    "bnb_int8": "INT8 (bitsandbytes)",
}
SPECULATION_WORDS = {
    "none": "no speculation",
    "prompt_lookup": "prompt-lookup speculation",
    "ngram": "n-gram speculation",
    "assistant": "assistant-model speculation",
    "early_exit": "early-exit speculation",
}
_FIRST = ("quantization", "dtype", "drop_layers", "speculative")  # said first: what a PM asks about
_FOLDED = {("quantization", "gptq"): ("gptq_bits", "gptq_group_size")}  # said inside another knob's words
_PLACEHOLDER = re.compile(r"\bN\b")  # a preset named with a placeholder ("Drop N layers") is said by its knobs
_Run = TypeVar("_Run", bound="RunLike")


def knob_value_words(knob: str, value: object, params: JSONMapping | None = None) -> str:
    """One knob's value in words: ``INT8 weight-only (torchao)``, ``static cache``, ``drop 2 layers``."""
    params = params or {}
    if knob == "quantization" and value == "gptq":
        return f"GPTQ {params.get('gptq_bits', 4)}-bit g{params.get('gptq_group_size', 128)}"
    if knob == "quantization":
        return QUANTIZATION_WORDS.get(str(value), str(value))
    if knob == "speculative":
        return SPECULATION_WORDS.get(str(value), f"{value} speculation")
    if knob == "drop_layers":
        return "no layers dropped" if not value else f"drop {value} layer{'s' if value != 1 else ''}"
    if knob == "attn_implementation":
        return f"{value} attention"
    if knob == "cache_implementation":
        return f"{value} cache"
    if knob == "kv_cache_quantization":
        return "unquantized KV cache" if value == "none" else f"KV cache {str(value).replace('_', ' ')}"
    if knob == "batching":
        return f"{value} batching"
    if knob == "compile":
        return "torch.compile" if value else "no compile"
    if knob == "dtype":
        return str(value)
    if isinstance(value, bool):
        return knob.replace("_", " ") + ("" if value else " off")
    return f"{knob.replace('_', ' ')} {value}"


def _ordered(changed: JSONMapping) -> list[str]:
    return sorted(changed, key=lambda k: (_FIRST.index(k) if k in _FIRST else len(_FIRST), k))


def _preset_name(engine: str, changed: JSONMapping) -> str | None:
    """The name of the preset this recipe is exactly (None: none, or one named with a placeholder)."""
    from engine.spec.presets import preset_of

    try:
        preset = preset_of({"engine": engine, **changed})
    except (TypeError, ValueError):
        return None
    if preset is None or preset.key == "baseline" or _PLACEHOLDER.search(preset.name):
        return None
    return preset.name


def _default_engine() -> str:
    from engine.spec import engines

    return engines.default().name


def changes_in_words(changed: JSONMapping | None, engine: str | None = None) -> str:
    """A recipe's changes from its engine's defaults in words: a preset's name, else each knob's words.

    ``{"quantization": "torchao_int8_weight_only"}`` -> ``INT8 weight-only (torchao)``;
    ``{"drop_layers": 2}`` -> ``drop 2 layers``; ``{}`` -> ``engine defaults`` (``vllm defaults``
    for an engine other than the default one, whose name then leads: ``vllm: max num seqs 16``).
    """
    engine = engine or _default_engine()
    changed = {k: v for k, v in (changed or {}).items() if k != "engine"}
    words = _preset_name(engine, changed)
    if words is None:
        folded = {k for (knob, value), inner in _FOLDED.items() if changed.get(knob) == value for k in inner}
        words = " · ".join(
            knob_value_words(k, changed[k], changed)
            for k in _ordered(changed)
            if k not in folded and changed[k] is not None
        )
    prefix = "" if engine == _default_engine() else engine
    if not words:
        return f"{prefix or 'engine'} defaults"
    return f"{prefix}: {words}" if prefix else words


def recipe_title(spec: JSONMapping | None, engine: str | None = None) -> str:
    """The recipe of a job spec (as a dict) in words (:func:`changes_in_words`)."""
    recipe = dict((spec or {}).get("recipe") or {})
    name = str(recipe.get("engine") or engine or _default_engine())
    return changes_in_words(changed_recipe_knobs({**recipe, "engine": name}), name)


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value).strip() != ""


def _whole(value: JSONValue) -> JSONValue:
    """A frame's float that holds a whole number (a column with gaps) as an int again."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def named(run_id: object, words: str, name: object = None) -> str:
    """``run 12 · INT8 weight-only (torchao)``; a user's name leads where given (``run 12 · nightly · bfloat16``)."""
    if _present(name) and words.lower() not in str(name).lower():
        return f"run {run_id} · {name} · {words}"
    return f"run {run_id} · {name}" if _present(name) else f"run {run_id} · {words}"


def run_name(run: RunLike) -> str:
    """How a run is named everywhere: its number, the user's name where given, its recipe in words; a predicted
    run's ends with ``predicted on <hardware>``."""
    spec = getattr(run, "spec", None)
    words = recipe_title(spec, getattr(run, "engine", None))
    traffic = traffic_title(spec)
    name = named(getattr(run, "id", "?"), f"{words} · {traffic}" if traffic else words, getattr(run, "name", None))
    return f"{name} · {predicted_on(run)}" if is_predicted(run) else name


def traffic_title(spec: JSONMapping | None) -> str | None:
    """The traffic's own short name (``trace azure.csv ×20``) when a run's source is not the default one (synthetic
    lengths, said by the workload's other words), else None."""
    traffic = stored_traffic(flat_workload((spec or {}).get("workload")))
    return traffic.title() if traffic is not None and traffic.source != sources.names()[0] else None


def changed_count(run: RunLike) -> int:
    """How many recipe knobs a run changes from its engine's defaults."""
    recipe = dict((getattr(run, "spec", None) or {}).get("recipe") or {})
    recipe.setdefault("engine", getattr(run, "engine", None) or _default_engine())
    return len(changed_recipe_knobs(recipe))


def default_baseline(runs: Sequence[_Run]) -> _Run | None:
    """Compare's default baseline: the run at its engine's defaults, else the fewest changed knobs, else the oldest.

    Finished runs are preferred (a failed run has nothing to compare against); ties go to the
    oldest (the earliest stored, then the lowest id). Returns the run, None for no runs.
    """
    if not runs:
        return None
    done = [r for r in runs if getattr(r, "status", "done") == "done"] or list(runs)
    done = [r for r in done if not is_predicted(r)] or done  # a prediction is checked against a measurement

    def rank(run: _Run) -> tuple[int, str, int]:
        created = getattr(run, "created_at", None)
        return (changed_count(run), created.isoformat() if created is not None else "", int(getattr(run, "id", 0)))

    return min(done, key=rank)


def why_baseline(run: RunLike, runs: Sequence[RunLike] = ()) -> str:
    """Why :func:`default_baseline` chose ``run`` among ``runs``, in words."""
    count = changed_count(run)
    why = (
        "its recipe is the engine's defaults"
        if count == 0
        else f"it changes the fewest knobs ({count}) from the engine's defaults"
    )
    if not is_predicted(run) and any(is_predicted(r) for r in runs):
        return f"it is measured (a prediction is checked against a measurement) and {why}"
    return why


def workload_title(changed: JSONMapping | None) -> str:
    """A workload's fields off their defaults (a run's stored ``knobs["workload"]``) in words, the defaults
    filled in: ``64→16 × 8 req · batch 4``."""
    from engine.report.recipes import workload_words
    from engine.spec import Workload

    return workload_words({**Workload().model_dump(mode="json"), **(changed or {})})


def short_model(model: object) -> str:
    """A model's label without its details: ``demo (SmolLM2-135M-Instruct)`` for the demo's long label."""
    text = "" if model is None else str(model)
    head, sep, rest = text.partition(" (")
    if not sep or "," not in rest:
        return text
    return f"{head} ({rest.split(',', 1)[0].strip()})"


def frame_run_names(frame: pd.DataFrame) -> list[str]:
    """:func:`run_name` for each row of a runs frame (``run_id``, ``engine``, ``name``, ``recipe.*`` columns; a row
    whose ``predicted`` is true ends with where it was predicted, from ``device_name``)."""
    knob_cols = sorted(c for c in frame.columns if c.startswith("recipe."))
    n = len(frame)

    def column(name: str) -> list[JSONValue]:
        return frame[name].tolist() if name in frame.columns else [None] * n

    memo: dict[tuple[JSONValue, ...], str] = {}
    out = []
    rows = zip(column("run_id"), column("engine"), column("name"), *(frame[c].tolist() for c in knob_cols), strict=True)
    for run_id, engine, name, *values in rows:
        key = (engine, *(repr(v) for v in values))
        words = memo.get(key)
        if words is None:
            recipe = {
                c.removeprefix("recipe."): _whole(v) for c, v in zip(knob_cols, values, strict=True) if _present(v)
            }
            engine_name = str(engine) if _present(engine) else _default_engine()
            words = memo[key] = changes_in_words(changed_recipe_knobs({"engine": engine_name, **recipe}), engine_name)
        out.append(named(run_id, words, name))
    for i, (predicted, device_name, device) in enumerate(
        zip(column("predicted"), column("device_name"), column("device"), strict=True)
    ):
        if _present(predicted) and bool(predicted):
            where = SimpleNamespace(device_name=device_name if _present(device_name) else None, device=device)
            out[i] = f"{out[i]} · {predicted_on(where)}"
    return out
