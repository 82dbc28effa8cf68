"""Memory growth over a run: a slope test of memory against requests served (the 24-hour OOM case).

For the job's RSS (``rss_bytes``) and the GPU's memory in use (``gpu_mem_used_bytes``) of the
telemetry series, a least-squares line against ``requests_done`` (:func:`scipy.stats.linregress`)
says how many bytes each request leaves behind. Memory that rises and falls with what is in flight
(a long prompt's activations, a batch's KV cache, an allocator returning pages) is not a leak, so a
finding needs every one of these:

1. **Enough of a run**: at least :data:`MIN_SAMPLES` samples over :data:`MIN_REQUEST_STEPS` request counts
   and :data:`MIN_SPAN_S` seconds.
2. **A slope whose 95 % interval excludes zero**, the interval widened for residuals that follow each
   other (lag-1 autocorrelation ρ: effective samples n (1 - ρ) / (1 + ρ)): thousands of telemetry samples of
   one sawtooth are not thousands of independent witnesses.
3. **A line that explains the series**: r² at least :data:`MIN_R2`.
4. **A floor that rises**: the lowest memory over the last quarter of the requests is above the lowest over
   the first quarter by at least :data:`MIN_FLOOR_SHARE` of what the line predicts between them. A
   sawtooth that returns to its base after each peak has a flat floor: it is never a leak.
5. **Growth that matters**: at least :data:`MIN_GROWTH_BYTES` and :data:`MIN_GROWTH_SHARE` of the memory
   in use over the run, and still growing over the second half of the requests (p < :data:`P_SECOND_HALF`):
   a cache that fills up once and then stays flat is not a leak.

The slope against time extrapolates the growth to 24 hours. Compare shows each run's findings from
the same function.
"""

from __future__ import annotations

import math
from typing import Protocol, TypedDict

import numpy as np

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.registry import human_bytes
from engine.report.diagnostics_base import Finding, present, sample_rows, times, values

P_SECOND_HALF = 0.05
MIN_GROWTH_BYTES = 8 * 2**20
MIN_GROWTH_SHARE = 0.02
MIN_SAMPLES = 8
MIN_REQUEST_STEPS = 4  # distinct request counts the line is fitted over
MIN_SPAN_S = 3.0  # seconds the samples span
MIN_R2 = 0.5  # of the series' variance the line explains
MIN_FLOOR_SHARE = 0.5  # of the line's predicted rise between the first and the last quarter
Z95 = 1.959963984540054
CRITICAL_PER_DAY_BYTES = 8 * 2**30
FIELDS: dict[str, str] = {"rss_bytes": "the job's RSS", "gpu_mem_used_bytes": "GPU memory in use"}
RULE = (
    "flagged only when the slope's 95 % interval (widened for residuals that follow each other) excludes zero, "
    f"the line explains the series (r² ≥ {MIN_R2:g}), the lowest memory rises from the first to the last quarter "
    f"of the requests, the samples span {MIN_SPAN_S:g} s or more, and it still grows over the second half"
)


class Line(Protocol):
    """A least-squares line as scipy's ``linregress`` gives it (the figures read here)."""

    slope: float
    intercept: float
    stderr: float
    rvalue: float
    pvalue: float


class _Trend(TypedDict):
    fit: Line
    ci: list[float]
    rho: float
    floor_rise_bytes: float
    span_s: float


def _fit(x: list[float], y: list[float]) -> Line | None:
    """scipy's linregress, or None when x does not vary."""
    from scipy import stats

    if len(set(x)) < 2:
        return None
    return stats.linregress(x, y)


def slope_interval(x: list[float], y: list[float], fit: Line) -> tuple[float, float, float]:
    """(low, high) of the slope's 95 % interval widened for autocorrelated residuals, and the lag-1 correlation ρ."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    resid = ys - (fit.intercept + fit.slope * xs)
    rho = 0.0
    if resid.size > 2 and float(np.std(resid)) > 0:
        rho = float(np.corrcoef(resid[:-1], resid[1:])[0, 1])
        rho = 0.0 if not math.isfinite(rho) else min(max(rho, 0.0), 0.99)
    widen = math.sqrt((1 + rho) / (1 - rho))  # stderr x sqrt(n / n_eff)
    half = Z95 * float(fit.stderr) * widen
    return fit.slope - half, fit.slope + half, rho


def floor_rise(x: list[float], y: list[float]) -> tuple[float, float]:
    """(the lowest memory of the last quarter of the requests minus the first quarter's, the distance between the
    quarters' middles in requests)."""
    lo, hi = min(x), max(x)
    quarter = (hi - lo) / 4
    first = [v for r, v in zip(x, y, strict=True) if r <= lo + quarter]
    last = [v for r, v in zip(x, y, strict=True) if r >= hi - quarter]
    return min(last) - min(first), 3 * quarter


def _trend(rows: list[tuple[int, float, float]], t_s: list[float]) -> _Trend | None:
    """The line of memory against requests when it passes rules 1-4 (module doc): its figures, else None."""
    x, y = [r for _, r, _ in rows], [v for _, _, v in rows]
    span_s = t_s[rows[-1][0]] - t_s[rows[0][0]] if t_s else 0.0
    fit = _fit(x, y) if span_s >= MIN_SPAN_S else None
    if fit is None or not math.isfinite(fit.slope) or fit.slope <= 0:
        return None
    low, high, rho = slope_interval(x, y, fit)
    rise, apart = floor_rise(x, y)
    if low <= 0 or fit.rvalue**2 < MIN_R2 or rise < MIN_FLOOR_SHARE * fit.slope * apart:
        return None
    return {"fit": fit, "ci": [low, high], "rho": rho, "floor_rise_bytes": rise, "span_s": span_s}


def _growth(series: JSONMapping, name: str) -> JSONObject | None:
    """The tests of one memory field (module doc); the evidence when it grows, else None."""
    pairs = [(i, v) for i, v in present(series, name)]
    done = values(series, "requests_done")
    rows = [(i, float(done[i]), v) for i, v in pairs if i < len(done) and done[i] is not None]
    if len(rows) < MIN_SAMPLES or len({r for _, r, _ in rows}) < MIN_REQUEST_STEPS:
        return None
    t_s = times(series)
    trend = _trend(rows, t_s)
    if trend is None:
        return None
    fit, x, y = trend["fit"], [r for _, r, _ in rows], [v for _, _, v in rows]
    growth = fit.slope * (max(x) - min(x))
    if growth < max(MIN_GROWTH_BYTES, MIN_GROWTH_SHARE * sorted(y)[len(y) // 2]):
        return None
    half = [(r, v) for _, r, v in rows if r >= (min(x) + max(x)) / 2]
    late = _fit([r for r, _ in half], [v for _, v in half]) if len(half) >= MIN_SAMPLES // 2 else None
    if late is None or late.slope <= 0 or not late.pvalue < P_SECOND_HALF:
        return None
    per_s = _fit([t_s[i] for i, _, _ in rows], y)
    return {
        "field": name,
        "slope_bytes_per_request": fit.slope,
        "slope_ci95": trend["ci"],
        "residual_autocorrelation": trend["rho"],
        "p_value": fit.pvalue,
        "r_squared": fit.rvalue**2,
        "floor_rise_bytes": trend["floor_rise_bytes"],
        "growth_bytes": growth,
        "per_day_bytes": None if per_s is None else per_s.slope * 86_400,
        "requests": [min(x), max(x)],
        "window": [t_s[rows[0][0]], t_s[rows[-1][0]]],
        "first_last": sample_rows(series, [rows[0][0], rows[-1][0]], [name, "requests_done"]),
        "n": len(rows),
    }


def memory_growth(series: JSONMapping | None) -> list[Finding]:
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
            f"its floor rose {human_bytes(got['floor_rise_bytes'])} from the first to the last quarter of the "
            "requests and it still grows over the second half (not a sawtooth, not a cache filling once)",
            f"rule: {RULE}",
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
