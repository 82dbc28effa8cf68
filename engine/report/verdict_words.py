"""The verdict in words, said once: every page, the CLI and the report phrase a :class:`Verdict` here.

- A significant change says which way and how much, with its 95 % CI on the same scale as the figure:
  ``1.35× faster decode (significant, 95 % CI 1.04–2.6×)``, ``perplexity 0.3 % worse (significant,
  95 % CI 0.01–0.59 %)``; changes under 10 % in percent, larger ones as a factor.
- No significant difference (the interval within the equivalence margin): ``no significant difference
  in decode (95 % CI from 2 % faster to 3 % slower; within ± 5 %)``.
- Not enough data (the interval spans no change but reaches beyond the margin, or too few samples):
  ``decode: not enough data (95 % CI from 2.1× faster to 1.2× slower)``; never "no change".
- No interval: the plain change, marked ``(no interval)``.

Which way is good, and the words for it, come from the metric registry: latency is faster/slower,
throughput higher/lower, memory and energy smaller/larger, accuracy better/worse.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.measure import registry
from engine.report.verdicts import EQUIVALENCE_MARGIN, Verdict

PERCENT_BELOW = 0.10  # changes under 10 % read as a percentage ("4 % slower"), larger ones as "1.8×"
MARGIN_WORDS = f"within ± {EQUIVALENCE_MARGIN * 100:g} %"
SAME = "no significant difference"
UNCLEAR = "not enough data"
TIED = f"tied: {SAME} ({MARGIN_WORDS})"  # Explore's ring: exactly Compare's "no significant difference"
NOT_SEPARATED = f"{UNCLEAR} to tell apart"  # Explore's ring for a pair neither different nor within the margin
_WORDS = {
    "latency": ("faster", "slower"),
    "throughput": ("higher", "lower"),
    "memory": ("smaller", "larger"),
    "energy": ("lower", "higher"),
    "accuracy": ("better", "worse"),
}


def times(factor: float) -> str:
    """A factor with three significant digits: ``1.35×``, ``2.6×``, ``12.4×``."""
    return f"{factor:.3g}×" if factor < 100 else f"{factor:,.0f}×"


def percent(value: float) -> str:
    """A percentage with two significant digits and no exponent: ``0.30``, ``0.059``, ``1.0``, ``4.2``, ``35``."""
    value = abs(value)
    if value == 0:
        return "0"
    if value < 0.001:
        return "<0.001"
    return f"{value:#.2g}".rstrip(".") if value < 9.95 else f"{value:.0f}"


def _metric(key: str, hints: Mapping[str, str] | None):
    return registry.lookup(key, (hints or {}).get(key))


def words_for(key: str, hints: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(good, bad) words of a metric: ``("faster", "slower")`` for latency."""
    return _WORDS.get(_metric(key, hints).kind, ("better", "worse"))


def _good(key: str, ratio: float, hints: Mapping[str, str] | None) -> bool:
    return (ratio < 1) == _metric(key, hints).minimise


def _as_factor(key: str, hints: Mapping[str, str] | None) -> bool:
    return _metric(key, hints).kind != "accuracy"


def _amount(key: str, ratio: float, scale: str, base: float | None, hints: Mapping[str, str] | None) -> float:
    """How far ``ratio`` is from no change, on ``scale``: a factor (``x``), a percentage or points."""
    if scale == "pts":
        return abs(ratio - 1) * (base or 0) * 100
    if scale == "x":
        return max(ratio, 1 / ratio)
    return (abs(ratio - 1) if not _as_factor(key, hints) else max(ratio, 1 / ratio) - 1) * 100


def _said(value: float, scale: str) -> str:
    return times(value) if scale == "x" else f"{value:.2g} pts" if scale == "pts" else f"{percent(value)} %"


def _span(low: float, high: float, scale: str) -> str:
    if scale == "x":
        return f"{low:.3g}–{times(high)}"
    return f"{low:.2g}–{high:.2g} pts" if scale == "pts" else f"{percent(low)}–{percent(high)} %"


def _scale(key: str, ratios: list[float], base: float | None, hints: Mapping[str, str] | None) -> str:
    metric = _metric(key, hints)
    if metric.kind == "accuracy":
        return "pts" if metric.unit == "ratio" and base else "%"
    big = max(max(r, 1 / r) for r in ratios if r > 0) - 1 >= PERCENT_BELOW
    return "x" if big else "%"


def change_words(key: str, ratio: float, base: float | None = None, hints: Mapping[str, str] | None = None) -> str:
    """``1.35× faster``, ``0.3 % worse``, ``1.2 pts worse`` (accuracy shares); ``no change``."""
    if ratio == 1 or ratio <= 0:
        return "no change"
    good, bad = words_for(key, hints)
    scale = _scale(key, [ratio], base, hints)
    return f"{_said(_amount(key, ratio, scale, base, hints), scale)} {good if _good(key, ratio, hints) else bad}"


def ci_words(verdict: Verdict, base: float | None = None, hints: Mapping[str, str] | None = None) -> str:
    """The ratio's 95 % CI on the figure's own scale: ``95 % CI 1.04–2.6×``, ``95 % CI from 2 % faster to
    3 % slower`` (an interval spanning no change names both ends in words); ``""`` without one."""
    iv, key = verdict.interval, verdict.key
    if iv is None or iv.lo <= 0:
        return ""
    scale = _scale(key, [iv.lo, iv.hi, verdict.ratio or 1.0], base, hints)
    if iv.lo <= 1 <= iv.hi:
        good, bad = words_for(key, hints)
        ends = [
            f"{_said(_amount(key, r, scale, base, hints), scale)} {good if _good(key, r, hints) else bad}"
            for r in (iv.lo, iv.hi)
            if r != 1
        ]
        return "95 % CI " + (f"from {ends[0]} to {ends[1]}" if len(ends) == 2 else f"up to {ends[0]}")
    low, high = sorted(_amount(key, r, scale, base, hints) for r in (iv.lo, iv.hi))
    return f"95 % CI {_span(low, high, scale)}"


def _leads(key: str, hints: Mapping[str, str] | None) -> bool:
    """Whether the change comes before the figure's name (``1.35× faster decode``, not ``decode 1.35× faster``)."""
    return _metric(key, hints).kind == "latency"


def phrase(
    what: str, verdict: Verdict | None, base: float | None = None, hints: Mapping[str, str] | None = None
) -> str | None:
    """A figure's change said as far as the evidence goes (module doc); None without a ratio or verdict."""
    if verdict is None:
        return None
    key, ratio = verdict.key, verdict.ratio
    if verdict.state in ("better", "worse") and ratio is not None:
        change = change_words(key, ratio, base, hints)
        said = f"{change} {what}" if _leads(key, hints) else f"{what} {change}"
        ci = ci_words(verdict, base, hints)
        return f"{said} (significant{', ' + ci if ci else ''})"
    if verdict.state in ("better", "worse"):  # a zero baseline: no ratio to say
        return f"{what} {words_for(key, hints)[0 if verdict.state == 'better' else 1]} (significant)"
    if verdict.state == "same":
        ci = ci_words(verdict, base, hints)
        return f"{SAME} in {what} ({ci + '; ' if ci else ''}{MARGIN_WORDS})"
    if verdict.state == "unclear":
        ci = ci_words(verdict, base, hints)
        return f"{what}: {UNCLEAR}" + (f" ({ci})" if ci else "")
    if verdict.state == "thin":
        return f"{what}: {UNCLEAR} ({verdict.reason})" if verdict.reason else f"{what}: {UNCLEAR}"
    if ratio is None:
        return None
    change = change_words(key, ratio, base, hints)
    return (f"{change} {what}" if _leads(key, hints) else f"{what} {change}") + " (no interval)"


def table_words(verdict: Verdict | None) -> str:
    """A verdict table cell: ``better (significant)``, ``no significant difference``, ``not enough data``."""
    if verdict is None:
        return "–"
    if verdict.significant:
        return f"{verdict.state} (significant)"
    if verdict.state == "same":
        return f"{SAME} ({MARGIN_WORDS})"
    if verdict.state == "unclear":
        return UNCLEAR
    if verdict.state == "thin":
        return f"{UNCLEAR} ({verdict.reason.replace('; ', ', ')})" if verdict.reason else UNCLEAR
    return verdict.reason or "no interval"


def _decimals(*values: float) -> int:
    """Decimals enough to tell ``values`` apart (2 to 5): ``1.003`` beside ``1.00004`` and ``1``."""
    for decimals in range(2, 6):
        if len({f"{v:.{decimals}f}" for v in values}) == len(set(values)):
            return decimals
    return 5


def ratio_words(ratio: float | None, verdict: Verdict | None) -> str:
    """A ratio cell: ``0.74× (95 % CI 0.39–0.96)``, the ratio and its interval on one scale; ``–`` for none."""
    if ratio is None:
        return "–"
    iv = None if verdict is None else verdict.interval
    if iv is None:
        return f"{ratio:.{_decimals(ratio, 1.0)}f}×"
    d = _decimals(iv.lo, ratio, iv.hi, 1.0)
    return f"{ratio:.{d}f}× (95 % CI {iv.lo:.{d}f}–{iv.hi:.{d}f})"


VERDICT_NOTE = (
    f"Verdicts: better or worse (significant) when the ratio's 95 % CI excludes 1; {SAME} when it spans 1 "
    f"and lies {MARGIN_WORDS}; {UNCLEAR} when it spans 1 but reaches beyond that margin (the runs cannot tell a "
    "real difference from none)."
)
