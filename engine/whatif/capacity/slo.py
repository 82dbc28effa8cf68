"""The capacity planner's SLO and its check on one simulated probe (pure).

An SLO bounds TTFT, TPOT and E2E latency (any of them, in ms). It is read one of two ways:

- **at a percentile** (default p90): each bounded figure's percentile over the probe's requests (numpy's
  linear interpolation, as the project's metrics take percentiles) is at most its limit;
- **as goodput**: the share of requests that met every limit (a request without a figure, or failed,
  misses) is at least a stated fraction (e.g. 0.95).

The figures are the project's per-request figures (:mod:`engine.measure.stamps`) counted from each
request's due time: the simulated client never sends late, except where the engine blocks it
(transformers' ``generate``), and a request that waited for its batch waited all the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from engine.jsonvalue import JSONObject
from engine.measure.records import RequestRecord
from engine.measure.stamps import e2el_ns, measured_requests, tpot_ns, ttft_ns

NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2el_ms": "E2E"}
NS_PER_MS = 1e6


class SloError(ValueError):
    """An SLO that cannot be checked: the message is one line saying what to give."""


@dataclass(frozen=True)
class CapacitySLO:
    """Limits in ms (None: no limit), the percentile they hold at, or a goodput fraction instead."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None
    percentile: float = 90.0
    goodput: float | None = None  # share of requests meeting every limit; None: the percentile rule

    def __post_init__(self) -> None:
        if not self.limits():
            raise SloError("give an SLO: a limit on TTFT, TPOT or E2E latency in ms (e.g. --slo-ttft-ms 500)")
        for key, limit in self.limits().items():
            if not (math.isfinite(limit) and limit > 0):
                raise SloError(f"the {NAMES[key]} limit must be a positive number of ms, not {limit:g}")
        if not 0 < self.percentile < 100:
            raise SloError(f"the SLO percentile must lie between 0 and 100 (e.g. 90), not {self.percentile:g}")
        if self.goodput is not None and not 0 < self.goodput <= 1:
            raise SloError(f"the goodput target is a share of requests above 0 and at most 1, not {self.goodput:g}")

    def limits(self) -> dict[str, float]:
        """``{"ttft_ms": 500.0, ...}``: the bounded figures only."""
        pairs = (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2el_ms", self.e2el_ms))
        return {k: float(v) for k, v in pairs if v is not None}

    @property
    def primary(self) -> str:
        """The first bounded figure (TTFT, then TPOT, then E2E): the x axis of the SLO chart."""
        return next(iter(self.limits()))

    def scaled(self, factor: float) -> CapacitySLO:
        """Every limit times ``factor`` (the percentile and goodput target kept)."""
        return replace(self, **{k: v * factor for k, v in self.limits().items()})

    def pct_words(self) -> str:
        """``p90``, ``p99.9``."""
        return f"p{self.percentile:g}"

    def words(self) -> str:
        """``TTFT p90 ≤ 500 ms and TPOT p90 ≤ 50 ms`` or ``goodput ≥ 95 % (TTFT ≤ 500 ms per request)``."""
        if self.goodput is not None:
            each = " and ".join(f"{NAMES[k]} ≤ {v:g} ms" for k, v in self.limits().items())
            return f"goodput ≥ {self.goodput * 100:g} % ({each} per request)"
        return " and ".join(f"{NAMES[k]} {self.pct_words()} ≤ {v:g} ms" for k, v in self.limits().items())

    def to_dict(self) -> JSONObject:
        return {**self.limits(), "percentile": self.percentile, "goodput": self.goodput, "words": self.words()}


@dataclass(frozen=True, eq=False)
class Figures:
    """A probe's per-request figures in ms, request by request (NaN where a request has none)."""

    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    e2el_ms: np.ndarray
    ok: np.ndarray  # bool: the request completed with a token

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> Figures:
        """The measured requests' figures, from their due time (module doc)."""
        rows = []
        for r in measured_requests(records):
            late = r.send_ns - r.arrival_ns
            first, last, per = ttft_ns(r), e2el_ns(r), tpot_ns(r)
            ok = r.ok and first is not None
            rows.append(
                (
                    (first + late) / NS_PER_MS if ok and first is not None else math.nan,
                    per / NS_PER_MS if ok and per is not None else math.nan,
                    (last + late) / NS_PER_MS if ok and last is not None else math.nan,
                    ok,
                )
            )
        cols = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
        return cls(*(np.asarray(c, dtype=float) for c in cols[:3]), np.asarray(cols[3], dtype=bool))

    def __len__(self) -> int:
        return int(self.ok.size)

    def percentile(self, key: str, pct: float) -> float | None:
        """A figure's percentile over the requests that have it (None: none has it)."""
        values = getattr(self, key)
        values = values[~np.isnan(values)]
        return float(np.percentile(values, pct, method="linear")) if values.size else None

    def goodput(self, limits: dict[str, float]) -> float:
        """The share of requests meeting every limit (failed requests miss; a request without a TPOT is not held
        to it, as :func:`engine.measure.stamps.meets_slo` rules)."""
        if not len(self):
            return 0.0
        good = self.ok.copy()
        for key, limit in limits.items():
            values = getattr(self, key)
            good &= np.isnan(values) | (values <= limit) if key == "tpot_ms" else values <= limit
        return float(good.mean())


@dataclass(frozen=True)
class SloCheck:
    """The SLO on one probe: passed, each figure, and how far from the limit (``ratio`` > 1 fails)."""

    passed: bool
    values: dict[str, float | None]
    ratio: float  # worst figure over its limit (goodput: target over achieved); inf with no figure
    reasons: list[str]

    def to_dict(self) -> JSONObject:
        return {
            "passed": self.passed,
            "values": dict(self.values),
            "ratio": _finite(self.ratio),
            "reasons": self.reasons,
        }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def check_slo(slo: CapacitySLO, figures: Figures) -> SloCheck:
    """The SLO's verdict on a probe's figures (module doc)."""
    limits = slo.limits()
    if slo.goodput is not None:
        share = figures.goodput(limits)
        ratio = slo.goodput / share if share > 0 else math.inf
        reasons = [] if share >= slo.goodput else [f"goodput {share:.1%} < {slo.goodput:.1%}"]
        return SloCheck(not reasons, {"goodput": share}, ratio, reasons)
    values: dict[str, float | None] = {}
    ratios, reasons = [], []
    for key, limit in limits.items():
        value = figures.percentile(key, slo.percentile)
        values[key] = value
        ratios.append(value / limit if value is not None else math.inf)
        if value is None:
            reasons.append(f"no {NAMES[key]} (no request had one)")
        elif value > limit:
            reasons.append(f"{NAMES[key]} {slo.pct_words()} {value:,.4g} ms > {limit:g} ms")
    return SloCheck(not reasons, values, max(ratios), reasons)
