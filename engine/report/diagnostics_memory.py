"""Memory growth over a run: a slope test of memory against requests served (the 24-hour OOM case).

For the job's RSS (``rss_bytes``) and the GPU's memory in use (``gpu_mem_used_bytes``) of the
telemetry series, a least-squares line against ``requests_done`` (:func:`scipy.stats.linregress`)
says how many bytes each request leaves behind. It is a finding when the slope is positive
and significant (p < :data:`P_MAX`), the growth over the run is at least :data:`MIN_GROWTH_BYTES`
and :data:`MIN_GROWTH_SHARE` of the memory in use, and the memory still grows over the second
half of the requests (p < :data:`P_SECOND_HALF`): a cache that fills up once and then stays
flat is not a leak. The slope against time extrapolates the growth to 24 hours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from engine.measure.registry import human_bytes
from engine.report.diagnostics_base import Finding, present, sample_rows, times, values

P_MAX = 0.001
P_SECOND_HALF = 0.05
MIN_GROWTH_BYTES = 8 * 2**20
MIN_GROWTH_SHARE = 0.02
MIN_SAMPLES = 8
MIN_REQUEST_STEPS = 4  # distinct request counts the line is fitted over
CRITICAL_PER_DAY_BYTES = 8 * 2**30
FIELDS: dict[str, str] = {"rss_bytes": "the job's RSS", "gpu_mem_used_bytes": "GPU memory in use"}


def _fit(x: list[float], y: list[float]) -> Any | None:
    """scipy's linregress, or None when x does not vary."""
    from scipy import stats

    if len(set(x)) < 2:
        return None
    return stats.linregress(x, y)


def _growth(series: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The slope test of one memory field; the evidence when it grows, else None."""
    pairs = [(i, v) for i, v in present(series, name)]
    done = values(series, "requests_done")
    rows = [(i, float(done[i]), v) for i, v in pairs if i < len(done) and done[i] is not None]
    if len(rows) < MIN_SAMPLES or len({r for _, r, _ in rows}) < MIN_REQUEST_STEPS:
        return None
    x, y = [r for _, r, _ in rows], [v for _, _, v in rows]
    fit = _fit(x, y)
    if fit is None or not math.isfinite(fit.pvalue) or fit.slope <= 0 or fit.pvalue >= P_MAX:
        return None
    growth = fit.slope * (max(x) - min(x))
    median = sorted(y)[len(y) // 2]
    if growth < max(MIN_GROWTH_BYTES, MIN_GROWTH_SHARE * median):
        return None
    half = [(r, v) for _, r, v in rows if r >= (min(x) + max(x)) / 2]
    late = _fit([r for r, _ in half], [v for _, v in half]) if len(half) >= MIN_SAMPLES // 2 else None
    if late is None or late.slope <= 0 or not late.pvalue < P_SECOND_HALF:
        return None
    t_s = times(series)
    per_s = _fit([t_s[i] for i, _, _ in rows], y)
    return {
        "field": name,
        "slope_bytes_per_request": fit.slope,
        "slope_ci95": [fit.slope - 1.96 * fit.stderr, fit.slope + 1.96 * fit.stderr],
        "p_value": fit.pvalue,
        "r_squared": fit.rvalue**2,
        "growth_bytes": growth,
        "per_day_bytes": None if per_s is None else per_s.slope * 86_400,
        "requests": [min(x), max(x)],
        "window": [t_s[rows[0][0]], t_s[rows[-1][0]]],
        "first_last": sample_rows(series, [rows[0][0], rows[-1][0]], [name, "requests_done"]),
        "n": len(rows),
    }


def memory_growth(series: Mapping[str, Any] | None) -> list[Finding]:
    """One finding per memory field that grows with the requests served (module doc)."""
    if not series:
        return []
    out = []
    for name, words in FIELDS.items():
        got = _growth(series, name)
        if got is None:
            continue
        per_request = human_bytes(got["slope_bytes_per_request"])
        per_day = got["per_day_bytes"]
        day_words = "" if per_day is None else f"; at this rate +{human_bytes(per_day)} per 24 hours"
        lo, hi = got["slope_ci95"]
        details = [
            f"{words} grew {human_bytes(got['growth_bytes'])} over requests "
            f"{got['requests'][0]:.0f}–{got['requests'][1]:.0f} ({per_request} per request, "
            f"95 % CI {human_bytes(lo)}–{human_bytes(hi)}; p = {got['p_value']:.1e}, r² = {got['r_squared']:.2f}, "
            f"{got['n']} samples){day_words}",
            "it still grows over the second half of the requests (not a cache filling once)",
        ]
        severity = "critical" if per_day is not None and per_day >= CRITICAL_PER_DAY_BYTES else "warning"
        out.append(
            Finding(
                kind="memory_growth",
                severity=severity,
                title=f"Memory growth: {words} +{per_request} per request served",
                evidence={"details": details, "windows": [got["window"]], "samples": got["first_last"], "fit": got},
                suggestion=(
                    "Something keeps per-request state: look for unbounded caches (prefix or KV caches without "
                    "a limit, stored outputs, tokenizer or compile caches) and references held after a request "
                    "ends. Confirm with a longer soak (workload soak_minutes, e.g. --soak-minutes 30) and "
                    "compare with the reference recipe; a long-running server with this slope will run out "
                    "of memory."
                ),
            )
        )
    return out
