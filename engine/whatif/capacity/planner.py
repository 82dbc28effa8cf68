"""A capacity plan: every configuration sized for one traffic and SLO, the best one, or the closest.

:func:`plan_capacity` sizes each configuration (:func:`engine.whatif.capacity.sizing.size`), saying each
one's answer to ``progress`` as it comes, and picks the **best**: the cheapest per million output tokens
within the SLO (at equal cost the fewest devices, then the most arrivals per device: the most headroom);
when no configuration within the SLO has a price, the fewest devices. When no configuration meets the SLO
at any rate, the plan names the **closest**: the one whose figures came nearest to the limits (smallest
ratio), at the rate it came nearest. Every figure is predicted by the serving simulator, never measured;
each configuration carries its calibration's label and band (none claimed when uncalibrated). Nothing is
stored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONObject
from engine.whatif.capacity.configs import LeftOut
from engine.whatif.capacity.sizing import Capacity, Configuration, Probe, size
from engine.whatif.capacity.slo import NAMES, CapacitySLO, SloCheck
from engine.whatif.capacity.traffic import Traffic
from engine.whatif.hardware import Hardware
from engine.whatif.predict.calibration import Calibrated, GroupFit, calibration_for
from engine.whatif.predict.deployment import Terms

if TYPE_CHECKING:
    from storage import Database

Progress = Callable[[str], None]
CHART_SCALES = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)  # the SLO chart's x axis: the SLO's limits times these


def calibrator(db: Database | None, progress: Progress | None = None) -> Callable[[Terms, Hardware], Calibrated]:
    """``calibrate(terms, hardware)`` from the database's measured runs, each group fitted once per plan."""
    fits: dict[tuple[int, ...], GroupFit] = {}
    done: dict[tuple[Terms, str], Calibrated] = {}

    def calibrate(terms: Terms, hardware: Hardware) -> Calibrated:
        key = (terms, hardware.key)
        if key not in done:
            done[key] = calibration_for(db, terms, hardware, progress=progress, fits=fits)
        return done[key]

    return calibrate


def short_calibration(cal: Calibrated) -> str:
    """``uncalibrated, no band`` or ``calibrated (carried by roofline), ±4 % TTFT p50, ±10 % TPOT p50``: the
    label's gist for a table cell (the whole label is said beside it)."""
    if not cal.calibrated:
        return "uncalibrated, no band"
    where = "calibrated (carried by roofline)" if cal.carried else "calibrated"
    if cal.band is None:
        return f"{where}, one run: no band"
    names = {"ttft_p50": "TTFT p50", "tpot_p50": "TPOT p50", "e2el_p90": "E2E p90"}
    band = ", ".join(f"±{cal.band.pct[k]:.0f} % {n}" for k, n in names.items() if k in cal.band.pct)
    return f"{where}, {band}"


@dataclass(frozen=True, eq=False)
class CapacityPlan:
    """The answer: each configuration sized, those left out, the best (or the closest), in one sentence."""

    traffic: Traffic
    slo: CapacitySLO
    capacities: list[Capacity]
    left_out: list[LeftOut] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def met(self) -> list[Capacity]:
        return [c for c in self.capacities if c.main.sustained is not None]

    def best(self) -> Capacity | None:
        """The cheapest within the SLO; without prices, the fewest devices (module doc)."""
        priced = [c for c in self.met if c.main.cost.usd_per_million_tokens is not None]
        if priced:
            return min(priced, key=lambda c: (c.main.cost.usd_per_million_tokens, *_devices_key(c)))
        return min(self.met, key=_devices_key, default=None)

    def closest(self) -> Capacity | None:
        """When none meets the SLO: the configuration that came nearest to it."""
        near = self._closest()
        return near[0] if near else None

    def _closest(self) -> tuple[Capacity, Probe, SloCheck] | None:
        if self.met:
            return None
        near = [(c, *c.main.closest) for c in self.capacities if c.main.closest is not None]
        return min(near, key=lambda n: n[2].ratio, default=None)

    def sentence(self) -> str:
        """The plan's answer in a sentence (module doc)."""
        best = self.best()
        if best is not None:
            return _best_words(self, best)
        found = self._closest()
        if found is None:
            return f"No configuration meets {self.slo.words()} at any rate, and none could be simulated near it."
        near, probe, check = found
        figures = ", ".join(_value_words(self.slo, k, v) for k, v in check.values.items())
        return (
            f"No configuration meets {self.slo.words()} at any rate; the closest is {near.config.label} "
            f"(predicted): {figures} at {probe.rate:,.3g} {self.traffic.unit}, {check.ratio:.2g}x the limit."
        )

    def to_dict(self) -> JSONObject:
        best, near = self.best(), self.closest()
        return {
            "predicted": True,
            "traffic": self.traffic.to_dict(),
            "slo": self.slo.to_dict(),
            "configurations": [capacity_dict(c) for c in self.capacities],
            "left_out": [x.to_dict() for x in self.left_out],
            "best": best.config.label if best else None,
            "closest": near.config.label if near else None,
            "sentence": self.sentence(),
            "wall_s": round(self.wall_s, 2),
        }


def _devices_key(c: Capacity) -> tuple[float, float]:
    per_device = (c.main.sustained or 0.0) / c.config.tp
    return (c.main.cost.gpu_hours_per_hour or 0, -per_device)


def _value_words(slo: CapacitySLO, key: str, value: float | None) -> str:
    if key == "goodput":
        return f"goodput {value:.1%}" if value is not None else "no goodput"
    name = f"{NAMES[key]} {slo.pct_words()}"
    return f"{name} {value:,.4g} ms" if value is not None else f"no {name}"


def _best_words(plan: CapacityPlan, best: Capacity) -> str:
    main, unit, peak = best.main, plan.traffic.unit, plan.traffic.peak_rate
    cost = main.cost
    replicas = f"{cost.replicas} replica{'s' if cost.replicas != 1 else ''} ({cost.gpu_hours_per_hour} GPUs)"
    lead = "Cheapest" if cost.usd_per_million_tokens is not None else "Fewest devices"
    money = (
        f", ${cost.usd_per_million_tokens:,.3g} per 1M output tokens at {cost.price.words()}"
        if cost.usd_per_million_tokens is not None
        else "; no price given, so no cost"
    )
    return (
        f"{lead} within {plan.slo.words()}: {best.config.label}, {main.sustained:,.3g} {unit} per replica, "
        f"{replicas} for the peak of {peak:,.3g} {unit}{money} (predicted; {short_calibration(best.config.calibration)})."
    )


def capacity_dict(c: Capacity) -> JSONObject:
    """One configuration's answer as JSON: what it is, its calibration, each SLO's sizing, its probes."""
    cfg = c.config
    return {
        "configuration": cfg.label,
        "variant": cfg.variant,
        "hardware": cfg.hardware.key,
        "hardware_name": cfg.hardware.name,
        "tp": cfg.tp,
        "predicted": True,
        "calibration": cfg.calibration.to_dict(),
        "flat_out_rate": c.flat_out,
        **c.main.to_dict(),
        "curve": [s.to_dict() for s in c.sized[1:]],
        "probes": [
            {"rate": p.rate, "saturated": p.saturated, "wall_s": round(p.wall_s, 3), **p.check(c.main.slo).to_dict()}
            for p in sorted(c.probes, key=lambda p: p.rate)
        ],
        "wall_s": round(c.wall_s, 2),
    }


def plan_capacity(
    configs: Sequence[Configuration],
    traffic: Traffic,
    slo: CapacitySLO,
    *,
    scales: Sequence[float] = (),
    left_out: Sequence[LeftOut] = (),
    progress: Progress | None = None,
    each: Callable[[int, Capacity], None] | None = None,
) -> CapacityPlan:
    """Size every configuration (module doc); ``scales`` adds the SLO chart's scaled SLOs; ``each(i, capacity)``
    hears each configuration's answer as it comes (a page's progress bar)."""
    t0 = time.perf_counter()
    sized = []
    for i, config in enumerate(configs):
        if progress:
            progress(f"[{i + 1}/{len(configs)}] sizing {config.label} ...")
        sized.append(size(config, traffic, slo, scales, progress))
        if each:
            each(i, sized[-1])
    return CapacityPlan(traffic, slo, sized, list(left_out), time.perf_counter() - t0)
