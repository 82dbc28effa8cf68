"""Compare runs with a baseline: metric ratios and a plain-language summary a PM can read.

Works on any run-like object with ``id``, ``name``, ``status``, ``error``, ``model``,
``engine``, ``device``, ``spec``, ``metrics`` and ``quality`` (storage's RunDetail).
Missing metrics or accuracy never raise: they are left out of ratios and said in words.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from engine.measure.registry import LATENCY_GROUPS
from engine.report.pareto import minimise_by_default
from engine.report.results import SCALARS

# (key in the flat metric dict, label, unit)
COMPARE_METRICS: tuple[tuple[str, str, str], ...] = (
    ("ttft_ms_p50", "TTFT p50", "ms"),
    ("ttft_ms_p90", "TTFT p90", "ms"),
    ("ttft_ms_p99", "TTFT p99", "ms"),
    ("tpot_ms_p50", "TPOT p50 (GenAI-Perf: ITL)", "ms"),
    ("tpot_ms_p99", "TPOT p99 (GenAI-Perf: ITL)", "ms"),
    ("itl_ms_p50", "ITL p50", "ms"),
    ("itl_ms_p99", "ITL p99", "ms"),
    ("e2el_ms_p50", "E2EL p50", "ms"),
    ("e2el_ms_p99", "E2EL p99", "ms"),
    ("output_tokens_per_s", "output tokens/s", "tok/s"),
    ("requests_per_s", "requests/s", "req/s"),
    ("tokens_per_s_per_user", "tokens/s per user", "tok/s"),
    ("goodput_requests_per_s", "goodput", "req/s"),
    ("peak_memory_bytes", "peak memory", "bytes"),
    ("load_s", "load time", "s"),
)
QUALITY_LABELS: dict[str, str] = {
    "perplexity": "perplexity",
    "kl_mean": "KL mean",
    "kl_p99": "KL p99",
    "top1_agreement": "top-1 agreement",
    "greedy_flip_rate": "greedy flip rate",
}
SAME_WITHIN = 0.02  # ratios within 2 % are reported as "about the same"


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def flat_metrics(run: Any) -> dict[str, float | None]:
    """A run's metrics as flat keys (``ttft_ms_p50``, scalars, ``quality.<key>``)."""
    metrics = getattr(run, "metrics", None) or {}
    flat: dict[str, float | None] = {}
    for group in LATENCY_GROUPS:
        stats = metrics.get(group) or {}
        for key in ("mean", "p50", "p90", "p95", "p99"):
            flat[f"{group}_{key}"] = _number(stats.get(key))
    for key in SCALARS:
        flat[key] = _number(metrics.get(key))
    for key, value in (getattr(run, "quality", None) or {}).items():
        if _number(value) is not None:
            flat[f"quality.{key}"] = _number(value)
    return flat


def metric_label(key: str) -> str:
    """A human label for a flat metric key."""
    for k, label, _unit in COMPARE_METRICS:
        if k == key:
            return label
    if key.startswith("quality."):
        name = key.removeprefix("quality.")
        return QUALITY_LABELS.get(name, name.replace("_", " "))
    for group in LATENCY_GROUPS:
        if key.startswith(group + "_"):
            return f"{group.split('_')[0].upper()} {key.removeprefix(group + '_')} [ms]"
    return key.replace("_", " ")


@lru_cache(maxsize=16)
def _recipe_defaults(engine: str) -> tuple[tuple[str, Any], ...]:
    from engine.spec import Recipe

    union = typing.get_args(Recipe)[0]
    for cls in typing.get_args(union) or (union,):
        fields = getattr(cls, "model_fields", {})
        if "engine" in fields and fields["engine"].default == engine:
            return tuple(
                (name, f.get_default(call_default_factory=True)) for name, f in fields.items() if not f.is_required()
            )
    return ()


def changed_knobs(recipe: dict[str, Any] | None) -> dict[str, Any]:
    """The recipe's knobs that differ from the engine's defaults (``engine`` itself left out)."""
    recipe = dict(recipe or {})
    engine = str(recipe.pop("engine", ""))
    defaults = dict(_recipe_defaults(engine))
    return {k: v for k, v in recipe.items() if k not in defaults or defaults[k] != v}


def recipe_in_words(spec: dict[str, Any] | None, engine: str | None = None) -> str:
    """``transformers · dtype bfloat16 · attn sdpa · batch 8 · 128→32 tokens × 8 requests · cpu``.

    Only knobs that differ from the engine's defaults are named.
    """
    spec = spec or {}
    recipe = dict(spec.get("recipe") or {})
    workload = spec.get("workload") or {}
    parts = [str(recipe.get("engine") or engine or "?")]
    for key, value in sorted(changed_knobs(recipe).items()):
        if value is None:
            continue
        short = {"attn_implementation": "attn"}.get(key, key.replace("_", " "))
        parts.append(short if value is True else f"{short} {value}")
    if len(parts) == 1:
        parts.append("defaults")
    if workload:
        prompt = workload.get("prompt_tokens") or ("file" if workload.get("prompt_file") else "?")
        parts.append(f"batch {workload.get('batch_size', 1)}")
        parts.append(f"{prompt}→{workload.get('output_tokens', '?')} tokens × {workload.get('requests', '?')} requests")
    if spec.get("device"):
        parts.append(str(spec["device"]))
    return " · ".join(parts)


def _knobs(spec: dict[str, Any] | None) -> dict[str, Any]:
    spec = spec or {}
    knobs: dict[str, Any] = {"model": (spec.get("model") or {}).get("source"), "device": spec.get("device")}
    knobs.update({k: v for k, v in (spec.get("recipe") or {}).items()})
    knobs.update({k: v for k, v in (spec.get("workload") or {}).items()})
    return knobs


def spec_difference(spec: dict[str, Any] | None, baseline_spec: dict[str, Any] | None) -> str:
    """The knobs where a spec differs from the baseline's, e.g. ``dtype bfloat16, batch_size 8``."""
    mine, base = _knobs(spec), _knobs(baseline_spec)
    diffs = [f"{k} {mine.get(k)}" for k in sorted(set(mine) | set(base)) if mine.get(k) != base.get(k)]
    return ", ".join(diffs)


def run_label(run: Any, baseline: Any | None = None) -> str:
    """How a run is called in a comparison: its name, else what differs from the baseline."""
    if getattr(run, "name", None):
        return str(run.name)
    if baseline is not None and baseline is not run:
        diff = spec_difference(getattr(run, "spec", None), getattr(baseline, "spec", None))
        if diff:
            return diff
    return f"run {run.id}"


def ratio(value: float | None, base: float | None) -> float | None:
    """``value / base``, or None when either is missing or the base is zero."""
    if value is None or base is None or base == 0:
        return None
    return value / base


@dataclass(frozen=True)
class Comparison:
    """Runs side by side: the baseline, per-run flat metrics and ratios to the baseline."""

    baseline_id: int
    run_ids: list[int]
    labels: dict[int, str]
    values: dict[int, dict[str, float | None]]
    ratios: dict[int, dict[str, float | None]]
    summaries: dict[int, str]

    def metric_keys(self) -> list[str]:
        """Metrics shown: the standard set, then every quality key any run has."""
        keys = [k for k, _l, _u in COMPARE_METRICS]
        quality = sorted({k for v in self.values.values() for k in v if k.startswith("quality.")})
        return keys + quality


def compare_runs(runs: list[Any], baseline_id: int | None = None) -> Comparison:
    """Compare runs with the baseline (default: the first run)."""
    if not runs:
        raise ValueError("nothing to compare: no runs")
    by_id = {r.id: r for r in runs}
    if baseline_id is None or baseline_id not in by_id:
        baseline_id = runs[0].id
    base = by_id[baseline_id]
    values = {r.id: flat_metrics(r) for r in runs}
    ratios = {r.id: {k: ratio(values[r.id].get(k), values[baseline_id].get(k)) for k in values[r.id]} for r in runs}
    labels = {r.id: run_label(r, base) for r in runs}
    summaries = {r.id: summarize_against(r, base, labels[r.id]) for r in runs if r.id != baseline_id}
    return Comparison(baseline_id, [r.id for r in runs], labels, values, ratios, summaries)


def _speed_phrase(what: str, value: float | None, base: float | None, suffix: str = "") -> str | None:
    """Latency (lower is better): '2.3x faster decode (TPOT p50)'."""
    r = ratio(base, value)  # speed-up
    if r is None:
        return None
    if abs(r - 1) <= SAME_WITHIN:
        return f"{what} about the same{suffix}"
    return f"{r:.1f}x faster {what}{suffix}" if r > 1 else f"{1 / r:.1f}x slower {what}{suffix}"


def _percent(value: float | None, base: float | None) -> str | None:
    r = ratio(value, base)
    if r is None:
        return None
    change = (r - 1) * 100
    if abs(change) < 0.05:
        return "±0 %"
    digits = 1 if abs(change) < 10 else 0
    return f"{change:+.{digits}f} %"


def _quality_phrases(run: Any, base: Any) -> list[str]:
    q, bq = getattr(run, "quality", None) or {}, getattr(base, "quality", None) or {}
    q = {k: _number(v) for k, v in q.items() if _number(v) is not None}
    bq = {k: _number(v) for k, v in bq.items() if _number(v) is not None}
    if not q:
        source = str(((getattr(run, "spec", None) or {}).get("model") or {}).get("source", ""))
        return ["no accuracy (synthetic weights)" if source.startswith("synthetic:") else "accuracy not measured"]
    order = list(QUALITY_LABELS)
    phrases: list[str] = []
    for key in sorted(q, key=lambda k: (order.index(k) if k in order else len(order), k)):
        label, value, before = QUALITY_LABELS.get(key, key.replace("_", " ")), q[key], bq.get(key)
        if key == "perplexity":
            phrases.append(f"perplexity {_percent(value, before)}" if before else f"perplexity {value:.3g}")
        elif key.startswith("kl_"):
            phrases.append(f"{label} {value:.3g}")
        elif key in ("top1_agreement", "greedy_flip_rate"):
            phrases.append(f"{label} {value * 100:.1f} %")
        elif 0 <= value <= 1:  # task accuracy as a fraction
            phrases.append(
                f"{label} {(value - before) * 100:+.1f} pts" if before is not None else f"{label} {value * 100:.1f} %"
            )
        else:
            phrases.append(f"{label} {_percent(value, before)}" if before else f"{label} {value:.3g}")
    return phrases


def summarize_against(run: Any, base: Any, label: str | None = None) -> str:
    """One sentence: ``INT4: 2.3x faster decode (TPOT p50), TTFT 1.1x faster, perplexity +0.4 %, ...``."""
    label = label or run_label(run, base)
    if getattr(run, "status", "done") != "done":
        return f"{label}: {run.status} ({getattr(run, 'error', None) or 'no reason recorded'}); nothing to compare"
    if getattr(base, "status", "done") != "done":
        return f"{label}: the baseline run {base.id} {base.status}, so there is nothing to compare against"
    v, b = flat_metrics(run), flat_metrics(base)
    phrases = [
        _speed_phrase("decode", v.get("tpot_ms_p50"), b.get("tpot_ms_p50"), " (TPOT p50)"),
        _speed_phrase("first token", v.get("ttft_ms_p50"), b.get("ttft_ms_p50"), " (TTFT p50)"),
    ]
    tput = ratio(v.get("output_tokens_per_s"), b.get("output_tokens_per_s"))
    if tput is not None:
        phrases.append(f"throughput {tput:.1f}x (output tokens/s)")
    phrases = [p for p in phrases if p]
    if not phrases:
        phrases.append("no latency metrics to compare")
    phrases += _quality_phrases(run, base)
    mem = _percent(v.get("peak_memory_bytes"), b.get("peak_memory_bytes"))
    if mem is not None:
        phrases.append(f"peak memory {mem}")
    return f"{label}: " + ", ".join(phrases)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        from engine.report.results import human_bytes

        return human_bytes(int(value))
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:,.3g}" if abs(value) < 1 else f"{value:,.2f}"


def comparison_frame(comparison: Comparison, formatted: bool = False) -> pd.DataFrame:
    """One row per metric; a value column per run and a ``vs baseline`` ratio column for the others.

    ``formatted=False`` keeps numbers (CSV); ``True`` gives display strings.
    """
    units = {k: u for k, _l, u in COMPARE_METRICS}
    rows = []
    for key in comparison.metric_keys():
        if all(comparison.values[i].get(key) is None for i in comparison.run_ids):
            continue
        unit = units.get(key, "")
        row: dict[str, Any] = {
            "metric": metric_label(key),
            "unit": unit,
            "better": "lower" if minimise_by_default(key) else "higher",
        }
        for run_id in comparison.run_ids:
            mark = " (baseline)" if run_id == comparison.baseline_id else ""
            column = f"#{run_id} {comparison.labels[run_id]}{mark}"
            value = comparison.values[run_id].get(key)
            row[column] = _fmt(value, unit) if formatted else value
            if run_id != comparison.baseline_id:
                r = comparison.ratios[run_id].get(key)
                row[f"#{run_id} ÷ baseline"] = ("-" if r is None else f"{r:.2f}x") if formatted else r
        rows.append(row)
    return pd.DataFrame(rows)
