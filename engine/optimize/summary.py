"""A study in words and tables (pure): recipes in words, the trials table, the front, the best recipe.

The best feasible recipe is said in one sentence against the study's base recipe (trial 0),
e.g. "INT8 weight-only (torchao) + static cache: 1.4x faster decode (TPOT p50 12.1 ms vs
17.0 ms), perplexity +0.8 %, fits". Labels and units come from the metric registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure import registry
from engine.optimize.study import PPL_INCREASE, StudyDefinition, minimise
from engine.report.naming import knob_value_words
from engine.report.pareto import pareto_mask
from engine.report.recipes import changed_recipe_knobs

if TYPE_CHECKING:
    from storage.studies import TrialInfo

# What a faster first objective means, per latency group.
_FASTER = {
    "tpot_ms": "faster decode",
    "ttft_ms": "faster first token",
    "e2el_ms": "faster requests",
    "itl_ms": "faster decode",
}


class FrontPoint(TypedDict):
    """A measured trial as a point of the study's front (first objective against the accuracy axis)."""

    trial: int
    recipe: str
    x_key: str
    y_key: str | None
    x: float | None
    y: float | None
    feasible: bool
    on_front: bool
    run_id: int | None
    why: str | None


def recipe_words(
    params: JSONMapping,
    base_params: JSONMapping,
    base_recipe: JSONMapping | None = None,
    order: Sequence[str] = (),
) -> str:
    """What a trial changes from the base, joined by ``+`` in the study's knob ``order``
    (``the base recipe`` when nothing)."""
    order = list(order)
    changed = {k: params[k] for k in sorted(params, key=lambda k: (order.index(k) if k in order else len(order), k))}
    changed = {k: v for k, v in changed.items() if base_params.get(k) != v}
    if not changed:
        named = changed_recipe_knobs(base_recipe) if base_recipe else {}
        shown = " + ".join(knob_value_words(k, v, named) for k, v in sorted(named.items()) if v is not None)
        return f"the base recipe ({shown})" if shown else "the base recipe (engine defaults)"
    return " + ".join(knob_value_words(k, v, params) for k, v in changed.items())


def trial_count_words(definition: StudyDefinition, trials: Sequence[TrialInfo]) -> str:
    """``2 of 2 trials · 1 more pruned before running``: the trials the budget counts (in flight, complete,
    failed) against it, then those it does not (pruned by the estimator or the rules, duplicates)."""
    counted = {"pending", "complete", "failed"}
    spent = sum(1 for t in trials if t.status in counted)
    words = [f"{spent} of {definition.budget.trials} trial{'s' if definition.budget.trials != 1 else ''}"]
    for status, word in (("pruned", "pruned before running"), ("duplicate", "a repeated recipe, not measured again")):
        n = sum(1 for t in trials if t.status == status)
        if n:
            words.append(f"{n} more {word}")
    return " · ".join(words)


def metric_label(key: str) -> str:
    return "perplexity increase [%]" if key == PPL_INCREASE else registry.lookup(key).header


def format_value(key: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:+.1f} %" if key == PPL_INCREASE else registry.lookup(key).format(value)


def trial_rows(definition: StudyDefinition, trials: Sequence[TrialInfo]) -> list[JSONObject]:
    """One row per trial: recipe in words, status, measured and predicted figures, feasibility."""
    base = next((t for t in trials if t.number == 0), None)
    base_params = base.params if base else {}
    recipe = definition.effective_base().recipe.model_dump(mode="json")
    rows = []
    for t in trials:
        m = t.measured or {}
        rows.append(
            {
                "trial": t.number,
                "recipe": recipe_words(t.params, base_params, recipe, definition.knobs),
                "status": t.status + (" (reused run)" if t.reused else ""),
                "tpot_p50_ms": m.get("tpot_ms_p50"),
                "ttft_p99_ms": m.get("ttft_ms_p99"),
                "tokens_per_s": m.get("output_tokens_per_s"),
                "ppl_increase_pct": m.get(PPL_INCREASE),
                "feasible": None if t.feasible is None else ("yes" if t.feasible else "no"),
                "why": t.reason,
                "predicted_tpot_ms": (t.predicted or {}).get("tpot_ms"),
                "predicted_ttft_ms": (t.predicted or {}).get("ttft_ms"),
                "job_id": t.job_id,
                "run_id": t.run_id,
                "params": t.params,
                "values": t.values,
            }
        )
    return rows


def accuracy_axis(definition: StudyDefinition, trials: Sequence[TrialInfo]) -> str | None:
    """The front's second axis: the second objective, else the perplexity increase or KL when measured."""
    keys = definition.objective_keys
    if len(keys) > 1:
        return keys[1]
    for key in (PPL_INCREASE, "quality.kl_mean"):
        if any((t.measured or {}).get(key) is not None for t in trials):
            return key
    return None


def front_rows(definition: StudyDefinition, trials: Sequence[TrialInfo]) -> list[FrontPoint]:
    """Measured trials as points (first objective vs the accuracy axis), feasible ones marked on the front."""
    x_key, y_key = definition.objective_keys[0], accuracy_axis(definition, trials)
    done = [t for t in trials if t.status == "complete"]
    base = next((t for t in trials if t.number == 0), None)
    recipe = definition.effective_base().recipe.model_dump(mode="json")
    xs = [(t.measured or {}).get(x_key) if t.feasible else None for t in done]
    ys = [((t.measured or {}).get(y_key) if y_key else 0.0) if t.feasible else None for t in done]
    mask = pareto_mask(xs, ys, minimise(x_key), True if y_key is None else minimise(y_key))
    return [
        {
            "trial": t.number,
            "recipe": recipe_words(t.params, base.params if base else {}, recipe, definition.knobs),
            "x_key": x_key,
            "y_key": y_key,
            "x": (t.measured or {}).get(x_key),
            "y": (t.measured or {}).get(y_key) if y_key else None,
            "feasible": bool(t.feasible),
            "on_front": on,
            "run_id": t.run_id,
            "why": t.reason,
        }
        for t, on in zip(done, mask, strict=True)
    ]


def best_trial(definition: StudyDefinition, trials: Sequence[TrialInfo]) -> TrialInfo | None:
    """The feasible measured trial best on the first objective (the lowest number on a tie)."""
    key = definition.objective_keys[0]
    feasible = [t for t in trials if t.status == "complete" and t.feasible and (t.measured or {}).get(key) is not None]
    if not feasible:
        return None
    sign = 1.0 if minimise(key) else -1.0
    return min(feasible, key=lambda t: (sign * t.measured[key], t.number))


def _speed_clause(key: str, best: float, base: float) -> str:
    group = next((g for g in registry.LATENCY_GROUPS if key.startswith(g + "_")), None)
    label = registry.lookup(key).label.split(" (")[0]
    both = f"({label} {format_value(key, best)} vs {format_value(key, base)})"
    if minimise(key):
        return f"{base / best:.2g}x {_FASTER.get(group or '', 'better')} {both}" if best else both
    return f"{best / base:.2g}x the {label} {both}" if base else both


def best_sentence(definition: StudyDefinition, trials: Sequence[TrialInfo]) -> str:
    """The best feasible recipe so far in one sentence, against the base recipe (trial 0)."""
    measured = [t for t in trials if t.status == "complete"]
    best = best_trial(definition, trials)
    if best is None:
        broke = sum(1 for t in measured if not t.feasible)
        return f"No feasible recipe yet: {len(measured)} trial(s) measured, {broke} broke a constraint."
    key = definition.objective_keys[0]
    base = next((t for t in trials if t.number == 0 and t.status == "complete"), None)
    base_value = (base.measured or {}).get(key) if base else None
    words = recipe_words(best.params, base.params if base else {}, order=definition.knobs)
    if best is base or base_value is None:
        label = registry.lookup(key).label.split(" (")[0]
        value = format_value(key, best.measured[key])
        return f"No feasible recipe beats the base recipe yet ({label} {value}); {len(measured)} trial(s) measured."
    parts = [_speed_clause(key, best.measured[key], base_value)]
    m = best.measured
    if m.get(PPL_INCREASE) is not None:
        parts.append(f"perplexity {m[PPL_INCREASE]:+.1f} %")
    elif m.get("quality.kl_mean") is not None:
        parts.append(f"KL {m['quality.kl_mean']:.3g} nats")
    if (best.predicted or {}).get("fits"):
        parts.append("fits")
    elif m.get("peak_memory_bytes"):
        parts.append(f"peak memory {registry.human_bytes(m['peak_memory_bytes'])}")
    return f"{words}: {', '.join(parts)}"
