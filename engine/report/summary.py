"""The plain-language summary a PM reads: at most the headline changes in speed, quality and memory.

``INT8 weight-only: 1.8x slower decode, 4 % faster first token, perplexity +0.7 %, weights -52 %``,
then a caution when the runs differ in more than their recipe (model, engine, device, workload).
Every label, unit and direction comes from the metric registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.measure import registry
from engine.report.recipes import context_differences, run_label
from engine.report.values import flat_metrics, ratio, run_hints

SAME_WITHIN = 0.03  # ratios within 3 % read "about the same"
PERCENT_BELOW = 0.10  # changes under 10 % read as a percentage ("4 % slower"), larger ones as "1.8x"
MAX_TASKS = 2  # task scores named in a summary

Values = Mapping[str, float | None]


def times(factor: float) -> str:
    """A factor with two significant digits: ``1.8x``, ``12x``."""
    return f"{factor:.1f}x" if factor < 10 else f"{factor:.0f}x"


def speed_phrase(what: str, value: float | None, base: float | None) -> str | None:
    """A latency change (lower is better): ``2.6x faster decode``, ``4 % slower decode``, ``decode about the same``."""
    r = ratio(value, base)  # time taken relative to the baseline
    if r is None:
        return None
    if abs(r - 1) <= SAME_WITHIN:
        return f"{what} about the same"
    if r <= 1 / (1 + PERCENT_BELOW):
        return f"{times(1 / r)} faster {what}"
    if r >= 1 + PERCENT_BELOW:
        return f"{times(r)} slower {what}"
    return f"{abs(r - 1) * 100:.0f} % {'slower' if r > 1 else 'faster'} {what}"


def change_percent(value: float | None, base: float | None) -> str | None:
    """A relative change: ``+0.4 %``, ``-52 %``, ``±0 %``."""
    r = ratio(value, base)
    if r is None:
        return None
    change = (r - 1) * 100
    if abs(change) < 0.05:
        return "±0 %"
    digits = 1 if abs(change) < 10 else 0
    return f"{change:+.{digits}f} %"


def _speed(v: Values, b: Values) -> list[str]:
    phrases = [
        speed_phrase("decode", v.get("tpot_ms_p50"), b.get("tpot_ms_p50")),
        speed_phrase("first token", v.get("ttft_ms_p50"), b.get("ttft_ms_p50")),
    ]
    phrases = [p for p in phrases if p]
    if not phrases:
        tput = change_percent(v.get("output_tokens_per_s"), b.get("output_tokens_per_s"))
        phrases = [f"throughput {tput}"] if tput else ["no latency metrics to compare"]
    return phrases


def _reference_phrase(key: str, value: float) -> str:
    metric = registry.lookup(key)
    name = metric.label.removesuffix(" vs reference")
    return f"{name} {metric.format(value)}" + (" vs reference" if metric.vs_reference else "")


def _task_phrase(key: str, value: float, before: float | None, kind: str | None) -> str:
    metric = registry.lookup(key, kind)
    if before is None:
        return f"{metric.label} {metric.format(value)}"
    if metric.unit == "ratio":  # an accuracy share: the change in percentage points
        return f"{metric.label} {(value - before) * 100:+.1f} pts"
    return f"{metric.label} {change_percent(value, before)}"


def _no_accuracy(run: Any) -> str:
    source = str(((getattr(run, "spec", None) or {}).get("model") or {}).get("source", ""))
    return "no accuracy (synthetic weights)" if source.startswith("synthetic:") else "accuracy not measured"


def _quality(run: Any, v: Values, b: Values) -> list[str]:
    mine = {k: x for k, x in v.items() if k.startswith("quality.") and x is not None}
    if not mine:
        return [_no_accuracy(run)]
    phrases = []
    if "quality.perplexity" in mine:
        change = change_percent(mine["quality.perplexity"], b.get("quality.perplexity"))
        phrases.append(
            f"perplexity {change or registry.lookup('quality.perplexity').format(mine['quality.perplexity'])}"
        )
    else:
        key = next((k for k in ("quality.top1_agreement", "quality.kl_mean") if k in mine), None)
        if key:
            phrases.append(_reference_phrase(key, mine[key]))
    hints = run_hints(run)
    tasks = [k for k in mine if k.startswith("quality.task:")][:MAX_TASKS]
    phrases += [_task_phrase(k, mine[k], b.get(k), hints.get(k)) for k in tasks]
    return phrases or [_no_accuracy(run)]


def _memory(v: Values, b: Values) -> list[str]:
    weights = change_percent(v.get("weights_memory_bytes"), b.get("weights_memory_bytes"))
    if weights:
        return [f"weights {weights}"]
    peak = change_percent(v.get("peak_memory_bytes"), b.get("peak_memory_bytes"))
    return [f"peak memory {peak}"] if peak else []


def cautions(run: Any, base: Any) -> list[str]:
    """Why the ratios are not the recipe's alone: other differences, and a baseline with failed requests."""
    out = context_differences(run, base)
    failed = registry.failure_words(getattr(base, "metrics", None))
    if failed:
        out.append(f"baseline: {failed}")
    return out


def summarize_against(run: Any, base: Any, label: str | None = None) -> str:
    """One sentence: ``INT4: 2.3x faster decode, 4 % faster first token, perplexity +0.4 %, weights -60 %``."""
    label = label or run_label(run, base)
    if getattr(run, "status", "done") != "done":
        return f"{label}: {run.status} ({getattr(run, 'error', None) or 'no reason recorded'}); nothing to compare"
    if getattr(base, "status", "done") != "done":
        return f"{label}: the baseline run {base.id} {base.status}, so there is nothing to compare against"
    v, b = flat_metrics(run), flat_metrics(base)
    failed = registry.failure_words(getattr(run, "metrics", None))
    phrases = ([failed] if failed else []) + _speed(v, b) + _quality(run, v, b) + _memory(v, b)
    text = f"{label}: " + ", ".join(phrases)
    caution = cautions(run, base)
    if caution:
        text += f" (caution, not the recipe alone: {'; '.join(caution)})"
    return text
