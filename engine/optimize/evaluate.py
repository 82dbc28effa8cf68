"""A trial's outcome from its run (pure): objective values, constraint values, feasibility.

Figures are read as the registry's flat keys (:func:`engine.report.values.flat_metrics`); the
perplexity increase is the trial's perplexity over the study's base recipe's (trial 0), in %.
A constraint whose figure was not measured is broken ("not measured"), so a recipe is never
called feasible on a figure nobody saw. Optuna gets each constraint as a violation (<= 0:
met), scaled by its bound so that constraints of different units weigh alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from engine.jsonvalue import JSONMapping
from engine.measure import registry
from engine.optimize.study import PPL_INCREASE, StudyDefinition
from engine.report.values import flat_metrics

if TYPE_CHECKING:
    from engine.report.runlike import Measured

# The figures every trial shows, besides its objectives and constraints.
SHOWN: tuple[str, ...] = (
    "tpot_ms_p50",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "peak_memory_bytes",
    "quality.perplexity",
    PPL_INCREASE,
    "quality.kl_mean",
    "quality.greedy_flip_rate",
)


@dataclass(frozen=True)
class Bound:
    """One constraint: a figure, its bound, and which side of it is allowed."""

    name: str
    key: str
    bound: float
    at_most: bool  # True: figure <= bound; False: figure >= bound

    def label(self) -> str:
        if self.key == PPL_INCREASE:
            return f"perplexity increase <= {self.bound:g} %"
        metric = registry.lookup(self.key)
        return f"{metric.label} {'<=' if self.at_most else '>='} {metric.format(self.bound)}"


class Check(TypedDict):
    """One constraint on a trial's run (stored as the trial's ``constraints[name]``): its figure and bound, whether
    it holds, Optuna's violation (<= 0: met, scaled by the bound) and the constraint in words."""

    value: float | None
    bound: float
    ok: bool
    violation: float
    words: str


@dataclass(frozen=True)
class Outcome:
    """What a trial's run says: objective values (None: one is missing), figures, constraints."""

    values: list[float] | None
    measured: dict[str, float | None]
    constraints: dict[str, Check] = field(default_factory=dict)
    missing: str | None = None  # the objective that was not measured

    @property
    def feasible(self) -> bool:
        return all(c["ok"] for c in self.constraints.values())

    @property
    def broken(self) -> list[str]:
        """``perplexity increase <= 2 % (measured +215 %)`` for every constraint not met."""
        return [c["words"] for c in self.constraints.values() if not c["ok"]]

    def violations(self) -> dict[str, float]:
        """Optuna's constraint values: <= 0 met, > 0 broken (scaled by the bound)."""
        return {name: float(c["violation"]) for name, c in self.constraints.items()}


def bounds(definition: StudyDefinition, quality: JSONMapping | None = None) -> list[Bound]:
    """Every constraint of the study as a bound on a flat key (tasks: one per task of the base spec)."""
    c = definition.constraints
    out = []
    if c.max_ppl_increase_pct is not None:
        out.append(Bound("ppl_increase", PPL_INCREASE, c.max_ppl_increase_pct, True))
    if c.max_kl_mean is not None:
        out.append(Bound("kl_mean", "quality.kl_mean", c.max_kl_mean, True))
    if c.max_greedy_flip_rate is not None:
        out.append(Bound("greedy_flips", "quality.greedy_flip_rate", c.max_greedy_flip_rate, True))
    if c.min_task_accuracy is not None:
        for task in definition.base.quality.tasks:
            out.append(Bound(f"task:{task}", f"quality.task:{task}", c.min_task_accuracy, False))
    for key, bound in sorted(c.slo.items()):
        out.append(Bound(f"slo:{key}", key, float(bound), registry.minimise(key)))
    return out


def figures(run: Measured, base_figures: Mapping[str, float | None] | None) -> dict[str, float | None]:
    """A run's flat figures plus the perplexity increase over the base's (None without both)."""
    flat = flat_metrics(run)
    gpu = flat.get("output_tokens_per_s_per_gpu")
    if gpu is not None:  # on a GPU the throughput objective is per GPU
        flat["output_tokens_per_s"] = gpu
    ppl = flat.get("quality.perplexity")
    base_ppl = (base_figures or {}).get("quality.perplexity")
    flat[PPL_INCREASE] = (ppl / base_ppl - 1.0) * 100.0 if ppl is not None and base_ppl else None
    return flat


def _check(bound: Bound, value: float | None) -> Check:
    scale = max(abs(bound.bound), 1e-9)
    if value is None:
        return {
            "value": None,
            "bound": bound.bound,
            "ok": False,
            "violation": 1.0,
            "words": f"{bound.label()}: not measured",
        }
    excess = (value - bound.bound) if bound.at_most else (bound.bound - value)
    ok = excess <= 0
    shown = f"{value:+.1f} %" if bound.key == PPL_INCREASE else registry.lookup(bound.key).format(value)
    return {
        "value": value,
        "bound": bound.bound,
        "ok": ok,
        "violation": excess / scale,
        "words": f"{bound.label()} (measured {shown})",
    }


def evaluate(definition: StudyDefinition, run: Measured, base_figures: Mapping[str, float | None] | None) -> Outcome:
    """The outcome of a trial's done run; ``base_figures``: the base trial's :func:`figures` (itself for trial 0)."""
    flat = figures(run, base_figures)
    keys = definition.objective_keys
    measured = {k: flat.get(k) for k in dict.fromkeys([*SHOWN, *keys])}
    constraints = {}
    for bound in bounds(definition, getattr(run, "quality", None)):
        constraints[bound.name] = _check(bound, flat.get(bound.key))
        measured.setdefault(bound.key, flat.get(bound.key))
    values = [flat.get(k) for k in keys]
    missing = next((k for k, v in zip(keys, values, strict=True) if v is None), None)
    if missing is not None:
        return Outcome(None, measured, constraints, missing=missing)
    return Outcome([float(v) for v in values if v is not None], measured, constraints)
