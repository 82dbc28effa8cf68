"""The plain-language summary a PM reads: at most the headline changes in speed, quality and memory.

``INT8 weight-only: 1.8x slower decode (95 % CI 1.7–1.9), no significant difference in first token
(0.97–1.04), no significant change in perplexity (+0.7 % ± 2.1 %), weights -52 %``, then a caution
when the runs differ in more than their recipe (model, engine, device, workload).

Only significant differences are claimed (:mod:`engine.report.verdicts`): a change whose
interval spans 1 reads "no significant difference", one the samples cannot support "too few
requests to tell (n=4; p50 needs 6)", and one with no interval at all keeps its ratio
marked "(no interval)". Every label, unit and direction comes from the metric registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.measure import registry
from engine.report.naming import run_name
from engine.report.recipes import context_differences
from engine.report.values import flat_metrics, ratio, run_hints
from engine.report.verdicts import Verdict, verdicts_between

SAME_WITHIN = 0.03  # ratios within 3 % read "about the same"
PERCENT_BELOW = 0.10  # changes under 10 % read as a percentage ("4 % slower"), larger ones as "1.8x"
MAX_TASKS = 2  # task scores named in a summary

Values = Mapping[str, float | None]
Verdicts = Mapping[str, Verdict]


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


def _factor_span(low: float, high: float, faster: bool) -> str:
    lo, hi = (1 / high, 1 / low) if faster else (low, high)
    if max(abs(lo - 1), abs(hi - 1)) < PERCENT_BELOW:
        return f"{abs(lo - 1) * 100:.0f}–{abs(hi - 1) * 100:.0f} %"
    return f"{lo:.2f}–{hi:.2f}"


def significant_phrase(what: str, verdict: Verdict) -> str:
    """``1.75x slower decode (95 % CI 1.62–1.88)``, ``4 % faster decode (95 % CI 2–6 %)`` (time ratios)."""
    r, iv = verdict.ratio or 1.0, verdict.interval
    faster = r < 1
    factor = 1 / r if faster else r
    span = "" if iv is None else f" (95 % CI {_factor_span(iv.lo, iv.hi, faster)})"
    word = "faster" if faster else "slower"
    if factor - 1 < PERCENT_BELOW:
        return f"{(factor - 1) * 100:.0f} % {word} {what}{span}"
    return f"{times(factor)} {word} {what}{span}"


def verdict_phrase(what: str, value: float | None, base: float | None, verdict: Verdict | None) -> str | None:
    """A latency change said only as far as the evidence goes (module doc)."""
    if verdict is None or verdict.state == "none":
        plain = speed_phrase(what, value, base)
        return None if plain is None else f"{plain} (no interval)"
    if verdict.significant:
        return significant_phrase(what, verdict)
    if verdict.state == "same":
        return f"no significant difference in {what} ({verdict.span()})"
    return f"{what}: too few requests to tell ({verdict.reason})"


def _speed(v: Values, b: Values, verdicts: Verdicts) -> list[str]:
    phrases = [
        verdict_phrase("decode", v.get("tpot_ms_p50"), b.get("tpot_ms_p50"), verdicts.get("tpot_ms_p50")),
        verdict_phrase("first token", v.get("ttft_ms_p50"), b.get("ttft_ms_p50"), verdicts.get("ttft_ms_p50")),
    ]
    phrases = [p for p in phrases if p]
    if not phrases:
        tput = change_percent(v.get("output_tokens_per_s"), b.get("output_tokens_per_s"))
        verdict = verdicts.get("output_tokens_per_s")
        if tput and verdict is not None and verdict.state == "same":
            phrases = [f"no significant difference in throughput ({verdict.span()})"]
        elif tput:
            phrases = [f"throughput {tput}" + ("" if verdict is not None and verdict.significant else " (no interval)")]
        else:
            phrases = ["no latency metrics to compare"]
    return phrases


def accuracy_phrase(name: str, change: str, verdict: Verdict | None, margin: str) -> str:
    """``perplexity +35 % (± 3.1 %)``, ``no significant change in perplexity (+0.4 % ± 24 %)``."""
    if verdict is None or verdict.state == "none" or not margin:
        return f"{name} {change}"
    if verdict.state == "same":
        return f"no significant change in {name} ({change} ± {margin})"
    return f"{name} {change} (± {margin})"


def _reference_phrase(key: str, value: float) -> str:
    metric = registry.lookup(key)
    name = metric.label.removesuffix(" vs reference")
    return f"{name} {metric.format(value)}" + (" vs reference" if metric.vs_reference else "")


def _percent(value: float) -> str:
    return f"{value:.2f} %" if value < 0.1 else f"{value:.1f} %" if value < 10 else f"{value:.0f} %"


def _margin(verdict: Verdict | None, before: float | None, points: bool) -> str:
    """The change's 95 % margin: half its paired interval (a ratio: ``0.4 %``), else two standard errors
    (``2.8 pts`` for shares, ``24 %`` of the baseline otherwise)."""
    if verdict is None or not before:
        return ""
    if verdict.stderr is None:
        iv = verdict.interval
        return "" if iv is None or points else _percent((iv.hi - iv.lo) / 2 * 100)
    if points:
        return f"{2 * verdict.stderr * 100:.1f} pts"
    return _percent(2 * verdict.stderr / abs(before) * 100)


def _task_phrase(key: str, value: float, before: float | None, kind: str | None, verdict: Verdict | None) -> str:
    metric = registry.lookup(key, kind)
    if before is None:
        return f"{metric.label} {metric.format(value)}"
    if metric.unit == "ratio":  # an accuracy share: the change in percentage points
        return accuracy_phrase(
            metric.label, f"{(value - before) * 100:+.1f} pts", verdict, _margin(verdict, before, True)
        )
    return accuracy_phrase(metric.label, change_percent(value, before) or "", verdict, _margin(verdict, before, False))


def _no_accuracy(run: Any) -> str:
    source = str(((getattr(run, "spec", None) or {}).get("model") or {}).get("source", ""))
    return "no accuracy (synthetic weights)" if source.startswith("synthetic:") else "accuracy not measured"


def _quality(run: Any, v: Values, b: Values, verdicts: Verdicts) -> list[str]:
    mine = {k: x for k, x in v.items() if k.startswith("quality.") and x is not None}
    if not mine:
        return [_no_accuracy(run)]
    phrases = []
    if "quality.perplexity" in mine:
        before = b.get("quality.perplexity")
        change = change_percent(mine["quality.perplexity"], before)
        if change:
            verdict = verdicts.get("quality.perplexity")
            phrases.append(accuracy_phrase("perplexity", change, verdict, _margin(verdict, before, False)))
        else:
            phrases.append(f"perplexity {registry.lookup('quality.perplexity').format(mine['quality.perplexity'])}")
    else:
        key = next((k for k in ("quality.top1_agreement", "quality.kl_mean") if k in mine), None)
        if key:
            phrases.append(_reference_phrase(key, mine[key]))
    hints = run_hints(run)
    tasks = [k for k in mine if k.startswith("quality.task:")][:MAX_TASKS]
    phrases += [_task_phrase(k, mine[k], b.get(k), hints.get(k), verdicts.get(k)) for k in tasks]
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


def summarize_against(run: Any, base: Any, label: str | None = None, verdicts: Verdicts | None = None) -> str:
    """One sentence: ``INT4: 2.3x faster decode (95 % CI 2.1–2.5), ..., weights -60 %``.

    ``verdicts`` (:func:`engine.report.verdicts.verdicts_between`, from the runs' raw samples)
    decide what is claimed; without them the runs' stored intervals are used.
    """
    label = label or run_name(run)
    if getattr(run, "status", "done") != "done":
        return f"{label}: {run.status} ({getattr(run, 'error', None) or 'no reason recorded'}); nothing to compare"
    if getattr(base, "status", "done") != "done":
        return f"{label}: the baseline run {base.id} {base.status}, so there is nothing to compare against"
    v, b = flat_metrics(run), flat_metrics(base)
    if verdicts is None:
        keys = [*registry.keys_in("summary"), *(k for k in v if k.startswith("quality.task:"))]
        verdicts = verdicts_between(base, run, keys, (b, v), hints=run_hints(run))
    failed = registry.failure_words(getattr(run, "metrics", None))
    phrases = ([failed] if failed else []) + _speed(v, b, verdicts) + _quality(run, v, b, verdicts) + _memory(v, b)
    text = f"{label}: " + ", ".join(phrases)
    caution = cautions(run, base)
    if caution:
        text += f" (caution, not the recipe alone: {'; '.join(caution)})"
    return text
