"""Replicas, GPU-hours and cost per million output tokens of a configuration (pure).

- **Replicas** for the traffic's peak: ``ceil(peak rate / sustained rate)`` (one replica is ``tp`` devices).
- **GPU-hours per hour** of traffic: ``tp x replicas``, kept all hour (sized for the peak).
- **Cost per million output tokens**: ``price per device-hour x tp x replicas`` over the output tokens an
  hour of the traffic asks for (its mean rate x output tokens per arrival x 3,600), times 10^6.

A price is the user's assumption: the hardware catalog's on-demand list price (its source and date in the
entry's notes) unless one is given (``--price h100-sxm=4.5``); without either, cost is "no price given",
never a number made up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from engine.jsonvalue import JSONObject
from engine.whatif.hardware import Hardware

NO_PRICE = "no price given"
GIVEN = "given: your assumption"
CATALOG_PRICE = "the catalog's list price"
MAX_PRICE = 10_000.0  # USD per device-hour: more is a typo


@dataclass(frozen=True)
class Price:
    """USD per device-hour (None: none known) and where it comes from, in words."""

    per_device_hour: float | None
    source: str  # "given (your assumption)", "the catalog's list price" or "no price given"

    def words(self) -> str:
        """``$3.78 per device-hour (the catalog's list price)`` or ``no price given``."""
        return (
            self.source
            if self.per_device_hour is None
            else f"${self.per_device_hour:g} per device-hour ({self.source})"
        )

    def to_dict(self) -> JSONObject:
        return {"usd_per_device_hour": self.per_device_hour, "source": self.source}


def parse_prices(text: str) -> dict[str, float]:
    """``h100-sxm=4.5,l40s=1.9`` as ``{key: USD per device-hour}``; ValueError in one line."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        try:
            price = float(value) if sep else math.nan
        except ValueError:
            price = math.nan
        if not key.strip() or not (math.isfinite(price) and 0 < price <= MAX_PRICE):
            raise ValueError(
                f"price {part!r} is not HARDWARE=USD per device-hour (a number above 0 and at most {MAX_PRICE:g}), "
                "e.g. h100-sxm=4.5"
            )
        out[key.strip().lower()] = price
    return out


def price_of(hardware: Hardware, given: Mapping[str, float]) -> Price:
    """The price given for this hardware, else the catalog's list price, else none (module doc)."""
    if hardware.key in given:
        return Price(given[hardware.key], GIVEN)
    if hardware.price_per_hour is not None:
        return Price(hardware.price_per_hour, CATALOG_PRICE)
    return Price(None, NO_PRICE)


def replicas_for(peak_rate: float, sustained: float | None) -> int | None:
    """Replicas that serve ``peak_rate`` when one sustains ``sustained`` (None: it sustains nothing)."""
    if sustained is None or sustained <= 0:
        return None
    return max(1, math.ceil(peak_rate / sustained * (1 - 1e-9)))


@dataclass(frozen=True)
class Cost:
    """What a configuration costs for the traffic: replicas, devices kept all hour, dollars."""

    replicas: int | None
    gpu_hours_per_hour: int | None
    usd_per_hour: float | None
    usd_per_million_tokens: float | None
    price: Price

    def words(self) -> str:
        """``$1.23 per 1M output tokens`` or ``no price given``."""
        if self.usd_per_million_tokens is None:
            return self.price.source if self.price.per_device_hour is None else "not met"
        return f"${self.usd_per_million_tokens:,.3g} per 1M output tokens"

    def to_dict(self) -> JSONObject:
        return {
            "replicas": self.replicas,
            "gpu_hours_per_hour": self.gpu_hours_per_hour,
            "usd_per_hour": self.usd_per_hour,
            "usd_per_million_output_tokens": self.usd_per_million_tokens,
            "price": self.price.to_dict(),
        }


def cost_of(
    peak_rate: float, mean_rate: float, tokens_per_arrival: float, sustained: float | None, tp: int, price: Price
) -> Cost:
    """Replicas for the peak, devices kept, and dollars per hour and per million output tokens (module doc)."""
    replicas = replicas_for(peak_rate, sustained)
    if replicas is None:
        return Cost(None, None, None, None, price)
    devices = tp * replicas
    if price.per_device_hour is None:
        return Cost(replicas, devices, None, None, price)
    per_hour = price.per_device_hour * devices
    tokens_per_hour = mean_rate * tokens_per_arrival * 3600
    per_million = per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else None
    return Cost(replicas, devices, per_hour, per_million, price)
