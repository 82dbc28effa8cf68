"""SLOs of the SLA finder (pure): presets, the ``ttft_ms_p99=300,tpot_ms_p99=50`` form, and the verdict on a run.

A term names a latency percentile by its metric key (``ttft_ms_p99``); the older ``ttft_p99`` and
``ttft_ms.p99`` spellings read the same (:func:`engine.measure.registry.canonical`), and a bare
group (``ttft=300``) means its p99.

A probe **passes** when

1. every bound holds on the run's stored percentile (``metrics["ttft_ms"]["p99"] <= 300``); a
   percentile with no samples fails; and
2. with a goodput target, the run's ``goodput_fraction`` (the share of measured requests that
   met every per-request limit, :mod:`engine.measure.metrics`; failed requests count as
   misses) is at least the target. The per-request limits are the bounds on TTFT, TPOT and
   E2EL, written into the probe's workload (``slo_ttft_ms`` ...), so every probe run carries its
   goodput. ITL has no per-request limit there (its gaps are pooled over requests): an ITL
   bound is checked on its percentile only.

The goodput's interval is the exact (Clopper-Pearson) 95 % binomial interval of good
requests among measured ones.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure import registry

Group = Literal["ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"]
Percentile = Literal["p50", "p90", "p95", "p99"]
NAMES: dict[str, str] = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2el_ms": "E2EL"}
PER_REQUEST: dict[str, str] = {"ttft_ms": "slo_ttft_ms", "tpot_ms": "slo_tpot_ms", "e2el_ms": "slo_e2el_ms"}


class Bound(BaseModel):
    """One limit: a latency group's percentile at most ``limit_ms``."""

    model_config = ConfigDict(extra="forbid")

    metric: Group
    percentile: Percentile = "p99"
    limit_ms: float = Field(gt=0, le=86_400_000)

    @property
    def key(self) -> str:
        """The metric key of the bound (``ttft_ms_p99``)."""
        return f"{self.metric}_{self.percentile}"

    def words(self) -> str:
        """``TTFT p99 <= 200 ms``."""
        return f"{NAMES[self.metric]} {self.percentile} ≤ {self.limit_ms:g} ms"


SLO_PRESETS: dict[str, tuple[str, list[Bound]]] = {
    "mlperf-llama2-70b": (
        "MLPerf llama2-70b Server",
        [Bound(metric="ttft_ms", limit_ms=2000), Bound(metric="tpot_ms", limit_ms=200)],
    ),
    "chat": ("chat", [Bound(metric="ttft_ms", limit_ms=200), Bound(metric="itl_ms", limit_ms=50)]),
}


def parse_slo(text: str) -> tuple[str, list[Bound]]:
    """``(name, bounds)`` of a preset name or ``ttft_ms_p99=300,tpot_ms_p99=50``; ValueError with one line."""
    text = (text or "").strip()
    if text in SLO_PRESETS:
        return SLO_PRESETS[text]
    bounds: list[Bound] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        group, percentile = _group_percentile(key)
        if not sep or group not in NAMES or percentile not in ("p50", "p90", "p95", "p99"):
            raise ValueError(
                f"SLO term {part!r} is not METRIC_PCT=MS (METRIC: ttft_ms, tpot_ms, itl_ms, e2el_ms; PCT: p50, p90, "
                f"p95, p99), e.g. ttft_ms_p99=300,tpot_ms_p99=50; or a preset: {', '.join(SLO_PRESETS)}"
            )
        try:
            limit = float(value)
        except ValueError as exc:
            raise ValueError(f"SLO term {part!r}: {value.strip()!r} is not a number of ms") from exc
        if not math.isfinite(limit) or limit <= 0:
            raise ValueError(f"SLO term {part!r}: the limit must be a positive number of ms")
        bounds.append(Bound(metric=group, percentile=percentile, limit_ms=limit))
    if not bounds:
        raise ValueError(f"give an SLO: a preset ({', '.join(SLO_PRESETS)}) or e.g. ttft_ms_p99=300,tpot_ms_p99=50")
    if len({b.key for b in bounds}) != len(bounds):
        raise ValueError("an SLO names the same percentile twice")
    return "custom", bounds


def _group_percentile(term: str) -> tuple[str | None, str | None]:
    """(group, percentile) of a term's metric: any spelling of a latency percentile; a bare group is its p99."""
    name = term.strip().lower()
    if f"{name}_ms" in NAMES or name in NAMES:  # ttft, ttft_ms
        return name.removesuffix("_ms") + "_ms", "p99"
    metric = registry.lookup(registry.canonical(name))
    return metric.group, metric.stat


def slo_words(bounds: list[Bound]) -> str:
    """``TTFT p99 <= 200 ms and ITL p99 <= 50 ms``."""
    return " and ".join(b.words() for b in bounds)


def per_request_limits(bounds: list[Bound]) -> dict[str, float]:
    """The workload's goodput fields for these bounds (the tightest limit per group)."""
    out: dict[str, float] = {}
    for b in bounds:
        field = PER_REQUEST.get(b.metric)
        if field is not None:
            out[field] = min(out.get(field, math.inf), b.limit_ms)
    return out


def goodput_ci(metrics: JSONMapping, confidence: float = 0.95) -> list[float] | None:
    """The exact binomial interval of the goodput fraction (None without a goodput or requests)."""
    fraction = metrics.get("goodput_fraction")
    n = int(metrics.get("completed") or 0) + int(metrics.get("failed") or 0)
    if fraction is None or n == 0:
        return None
    from scipy.stats import beta

    k = round(fraction * n)
    alpha = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return [lo, hi]


def judge(bounds: list[Bound], goodput: float | None, metrics: JSONMapping) -> JSONObject:
    """The verdict on one probe run: ``{"passed", "reasons", "values", "goodput_ci"}`` (see the module doc)."""
    values: JSONObject = {}
    reasons: list[str] = []
    for b in bounds:
        value = (metrics.get(b.metric) or {}).get(b.percentile)
        values[b.key] = value
        if value is None:
            reasons.append(f"no {NAMES[b.metric]} {b.percentile} (no samples)")
        elif value > b.limit_ms:
            reasons.append(f"{NAMES[b.metric]} {b.percentile} {value:.4g} ms > {b.limit_ms:g} ms")
    fraction = metrics.get("goodput_fraction")
    values["goodput_fraction"] = fraction
    if goodput is not None and per_request_limits(bounds):
        if fraction is None:
            reasons.append("no goodput measured")
        elif fraction < goodput:
            reasons.append(f"goodput {fraction:.1%} < {goodput:.1%}")
    load = metrics.get("load") or {}
    values["achieved_rate"] = load.get("achieved_rate")
    values["requests_per_s"] = metrics.get("requests_per_s")
    return {"passed": not reasons, "reasons": reasons, "values": values, "goodput_ci": goodput_ci(metrics)}
