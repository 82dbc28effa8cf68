"""The plain-language summary a PM reads: at most the headline changes in speed, quality and memory.

``INT8 weight-only: 1.8× slower decode (significant, 95 % CI 1.7–1.9×), no significant difference in first
token (95 % CI from 3 % faster to 4 % slower; within ± 5 %), perplexity 0.3 % worse (significant, 95 % CI
0.01–0.59 %), weights -52 %``, then a caution when the runs differ in more than their recipe (model,
engine, device, workload).

Every change is judged by :mod:`engine.report.verdicts` and said by :mod:`engine.report.verdict_words`:
a quality loss reads "worse (significant)" in words, like a slower decode; an interval spanning no change
but wider than the margin reads "not enough data", never "no change". Every label, unit and direction
comes from the metric registry. A pair with a predicted run is said as a prediction
(:func:`engine.report.predicted.pair_words`: its error against the measured run, beside its band), never judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine.measure import registry
from engine.report.naming import run_name
from engine.report.predicted import other_differences, pair_words
from engine.report.recipes import context_differences
from engine.report.runlike import is_predicted
from engine.report.values import flat_metrics, ratio, run_hints
from engine.report.verdict_words import phrase
from engine.report.verdicts import Verdict, verdicts_between

if TYPE_CHECKING:
    from engine.report.runlike import RunLike

SAME_WITHIN = 0.03  # ratios within 3 % read "about the same" (figures without an interval)
MAX_TASKS = 2  # task scores named in a summary
# The headline speed figures, in the order they are said, with their name in a sentence.
SPEED_WORDS: tuple[tuple[str, str], ...] = (("tpot_ms_p50", "decode"), ("ttft_ms_p50", "first token"))

Values = Mapping[str, float | None]
Verdicts = Mapping[str, Verdict]


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


def _plain(key: str, v: Values, b: Values) -> Verdict | None:
    """A figure with no verdict at all: its plain ratio, said as "(no interval)"."""
    r = ratio(v.get(key), b.get(key))
    return None if r is None else Verdict(key, r, state="none", reason="no interval")


def speed_phrases(v: Values, b: Values, verdicts: Verdicts) -> list[str]:
    """Decode and first token as far as the evidence goes; throughput when neither was measured."""
    phrases = [phrase(what, verdicts.get(key) or _plain(key, v, b)) for key, what in SPEED_WORDS]
    found = [p for p in phrases if p]
    if found:
        return found
    said = phrase("throughput", verdicts.get("output_tokens_per_s") or _plain("output_tokens_per_s", v, b))
    return [said] if said else ["no latency metrics to compare"]


def _reference_phrase(key: str, value: float) -> str:
    metric = registry.lookup(key)
    name = metric.label.removesuffix(" vs reference")
    return f"{name} {metric.format(value)}" + (" vs reference" if metric.vs_reference else "")


def _task_phrase(key: str, value: float, before: float | None, kind: str | None, verdict: Verdict | None) -> str:
    metric = registry.lookup(key, kind)
    if before is None:
        return f"{metric.label} {metric.format(value)}"
    hints = {key: kind} if kind else None
    said = phrase(metric.label, verdict or _plain(key, {key: value}, {key: before}), before, hints)
    return said or f"{metric.label} {metric.format(value)}"


def _no_accuracy(run: RunLike) -> str:
    source = str(((getattr(run, "spec", None) or {}).get("model") or {}).get("source", ""))
    return "no accuracy (synthetic weights)" if source.startswith("synthetic:") else "accuracy not measured"


def quality_phrases(run: RunLike, v: Values, b: Values, verdicts: Verdicts) -> list[str]:
    """Perplexity (else fidelity to the reference) and up to :data:`MAX_TASKS` task scores, judged."""
    mine = {k: x for k, x in v.items() if k.startswith("quality.") and x is not None}
    if not mine:
        return [_no_accuracy(run)]
    phrases = []
    if "quality.perplexity" in mine:
        key = "quality.perplexity"
        said = phrase("perplexity", verdicts.get(key) or _plain(key, v, b), b.get(key))
        phrases.append(said or f"perplexity {registry.lookup(key).format(mine[key])}")
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


def cautions(run: RunLike, base: RunLike) -> list[str]:
    """Why the ratios are not the recipe's alone: other differences, and a baseline with failed requests."""
    out = other_differences(run, base, context_differences(run, base))
    failed = registry.failure_words(getattr(base, "metrics", None))
    if failed:
        out.append(f"baseline: {failed}")
    return out


def summarize_against(run: RunLike, base: RunLike, label: str | None = None, verdicts: Verdicts | None = None) -> str:
    """One sentence: ``INT4: 2.3× faster decode (significant, 95 % CI 2.1–2.5×), ..., weights -60 %``.

    ``verdicts`` (:func:`engine.report.verdicts.verdicts_between`, from the runs' raw samples)
    decide what is claimed; without them the runs' stored intervals are used.
    """
    label = label or run_name(run)
    if getattr(run, "status", "done") != "done":
        return f"{label}: {run.status} ({getattr(run, 'error', None) or 'no reason recorded'}); nothing to compare"
    if getattr(base, "status", "done") != "done":
        return f"{label}: the baseline run {base.id} {base.status}, so there is nothing to compare against"
    if is_predicted(run) or is_predicted(base):
        text = f"{label}: {pair_words(run, base)}"
        caution = cautions(run, base)
        return text + (f" (caution, not the recipe alone: {'; '.join(caution)})" if caution else "")
    v, b = flat_metrics(run), flat_metrics(base)
    if verdicts is None:
        keys = [*registry.keys_in("summary"), *(k for k in v if k.startswith("quality.task:"))]
        verdicts = verdicts_between(base, run, keys, (b, v), hints=run_hints(run))
    failed = registry.failure_words(getattr(run, "metrics", None))
    phrases = (
        ([failed] if failed else [])
        + speed_phrases(v, b, verdicts)
        + quality_phrases(run, v, b, verdicts)
        + _memory(v, b)
    )
    text = f"{label}: " + ", ".join(phrases)
    caution = cautions(run, base)
    if caution:
        text += f" (caution, not the recipe alone: {'; '.join(caution)})"
    return text
