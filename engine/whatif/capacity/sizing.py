"""One configuration sized (pure given its inputs): the highest rate one replica sustains within an SLO.

A :class:`Configuration` is a recipe's deployment on a hardware entry at a tensor parallelism, the step
costs it runs under (a calibration, or the uncalibrated roofline) and the price of its devices.
:class:`Prober` simulates the traffic's sample at a rate once (:mod:`engine.whatif.capacity.traffic`) and
keeps each request's figures; a probe **passes** an SLO when the SLO holds on them
(:func:`~engine.whatif.capacity.slo.check_slo`) and the server kept up: the project's saturation verdict
(:func:`engine.measure.saturation.judge`: achieved behind offered while the queue grew) does not call it
saturated and it completed at least 97 % of the arrivals due per second, so an SLO on TPOT alone never
passes a server whose queue grows without end.
:func:`size` searches the rate (:mod:`engine.whatif.capacity.search`) from the sample's throughput sent
all at once, for the SLO and for each scaled SLO asked (the chart of replicas against the SLO), every
search reusing the probes already simulated.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from engine.jsonvalue import JSONObject
from engine.measure import saturation
from engine.measure.records import RequestRecord
from engine.spec import JobSpec
from engine.whatif.capacity.cost import Cost, Price, cost_of
from engine.whatif.capacity.search import Bracket, search
from engine.whatif.capacity.slo import CapacitySLO, Figures, SloCheck, check_slo
from engine.whatif.capacity.traffic import Traffic
from engine.whatif.hardware import Hardware
from engine.whatif.predict.calibration import Calibrated
from engine.whatif.predict.deployment import Deployment
from engine.whatif.predict.replay import Case, case_records, simulate_case
from engine.whatif.serving import Arrivals, SimRequest

RESOLUTION = 0.03  # the SLO's own search: within 3 %
CURVE_RESOLUTION = 0.1  # the scaled SLOs of the chart: within 10 %
MAX_PROBES = 12
KEEP_UP = 0.97  # a server sustains a rate when it completes at least this share of the requests due per second


@dataclass(frozen=True, eq=False)
class Configuration:
    """A recipe variant on a hardware entry at a tensor parallelism, its costs and its price."""

    variant: str
    spec: JobSpec
    hardware: Hardware
    deployment: Deployment
    calibration: Calibrated
    price: Price

    @property
    def tp(self) -> int:
        return self.deployment.tp

    @property
    def label(self) -> str:
        """``fp8 · h100-sxm · TP2``."""
        return f"{self.variant} · {self.hardware.key} · TP{self.tp}"


@dataclass(frozen=True, eq=False)
class Probe:
    """The sample simulated at one rate: each request's figures and whether the server kept up."""

    rate: float
    figures: Figures
    saturated: bool | None
    saturation: str
    wall_s: float

    def check(self, slo: CapacitySLO) -> SloCheck:
        return check_slo(slo, self.figures)

    def passes(self, slo: CapacitySLO) -> bool:
        return self.saturated is not True and self.check(slo).passed


class Prober:
    """Simulations of one configuration's traffic at rates, each rate simulated once."""

    def __init__(self, config: Configuration, traffic: Traffic) -> None:
        self.config = config
        self.traffic = traffic
        self.probes: dict[float, Probe] = {}

    def _simulate(self, requests: list[SimRequest], client: Arrivals) -> tuple[list[RequestRecord], float]:
        dep = self.config.deployment
        case = Case(self.config.spec, requests, client, dep)
        result = simulate_case(case, self.config.calibration.costs)
        records, _start, _end = case_records(case, result)
        return records, result.stats.duration_s

    def flat_out(self) -> float:
        """Arrivals per second the server gets through with the whole sample sent at once: the search's start."""
        requests = self.traffic.requests(self.config.deployment.config.block_size)
        at_once = [replace(r, due_s=0.0) if r.due_s is not None else r for r in requests]
        _records, duration = self._simulate(at_once, Arrivals("max", seed=self.traffic.seed))
        units = len({r.session if r.session is not None else -1 - r.index for r in requests})
        return units / duration if duration > 0 else 1.0

    def __call__(self, rate: float) -> Probe:
        if rate not in self.probes:
            t0 = time.perf_counter()
            requests, client = self.traffic.at(rate, self.config.deployment.config.block_size)
            records, _ = self._simulate(requests, client)
            saturated, why = kept_up(records, client.kind, rate)
            self.probes[rate] = Probe(rate, Figures.of(records), saturated, why, time.perf_counter() - t0)
        return self.probes[rate]


def kept_up(records: list[RequestRecord], kind: str, rate: float) -> tuple[bool | None, str]:
    """(saturated, why): the project's saturation verdict, and falling behind by more than :data:`KEEP_UP` (the
    verdict lets a server off up to 10 % behind, too much for a capacity: a 9.9/s server "sustained" 10.8/s)."""
    verdict = saturation.judge(records, kind, rate)
    due = verdict.evidence.get("due_rate")
    achieved = verdict.achieved
    if verdict.saturated is not True and isinstance(due, float) and achieved is not None and achieved < KEEP_UP * due:
        return True, f"fell behind: achieved {achieved:.3g}/s < {KEEP_UP:.0%} of the {due:.3g}/s due"
    return verdict.saturated, verdict.reason


@dataclass(frozen=True, eq=False)
class Sized:
    """A configuration under one SLO: the rate it sustains, the probe there, its cost, how close it came."""

    scale: float
    slo: CapacitySLO
    bracket: Bracket
    at_sustained: Probe | None
    closest: tuple[Probe, SloCheck] | None  # the probe nearest to meeting it (its lowest load)
    cost: Cost

    @property
    def sustained(self) -> float | None:
        return self.bracket.low

    def to_dict(self) -> JSONObject:
        at = self.at_sustained
        near = self.closest
        return {
            "scale": self.scale,
            "slo": self.slo.to_dict(),
            "sustained_rate": self.sustained,
            "failed_at_rate": self.bracket.high,
            "converged": self.bracket.converged,
            "search": self.bracket.why,
            "at_sustained": at.check(self.slo).to_dict() if at else None,
            "closest": {"rate": near[0].rate, **near[1].to_dict()} if near else None,
            **self.cost.to_dict(),
        }


@dataclass(frozen=True, eq=False)
class Capacity:
    """A configuration sized under its SLO (first) and each scaled SLO asked."""

    config: Configuration
    flat_out: float
    sized: list[Sized]
    probes: list[Probe] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def main(self) -> Sized:
        return self.sized[0]


def _closest(probes: Sequence[Probe], slo: CapacitySLO) -> tuple[Probe, SloCheck] | None:
    """The unsaturated probe whose figures came nearest to the SLO (smallest ratio to its limits)."""
    checked = [(p, p.check(slo)) for p in probes if p.saturated is not True]
    return min(checked, key=lambda pc: (pc[1].ratio, pc[0].rate)) if checked else None


def _sized(prober: Prober, slo: CapacitySLO, scale: float, start: float, resolution: float) -> Sized:
    known = {rate: p.passes(slo) for rate, p in prober.probes.items()}
    bracket = search(lambda r: prober(r).passes(slo), start, resolution=resolution, max_probes=MAX_PROBES, known=known)
    traffic, config = prober.traffic, prober.config
    cost = cost_of(
        traffic.peak_rate, traffic.mean_rate, traffic.tokens_per_arrival, bracket.low, config.tp, config.price
    )
    at = prober.probes.get(bracket.low) if bracket.low is not None else None
    near = _closest(list(prober.probes.values()), slo) if bracket.low is None else None
    return Sized(scale, slo, bracket, at, near, cost)


def size(
    config: Configuration,
    traffic: Traffic,
    slo: CapacitySLO,
    scales: Sequence[float] = (),
    progress: Callable[[str], None] | None = None,
) -> Capacity:
    """The configuration under ``slo`` and under ``slo`` scaled by each of ``scales`` (module doc)."""
    t0 = time.perf_counter()
    prober = Prober(config, traffic)
    start = float(f"{max(prober.flat_out(), 1e-6):.6g}")
    sized = [_sized(prober, slo, 1.0, start, RESOLUTION)]
    for k in scales:
        if not math.isclose(k, 1.0):
            sized.append(_sized(prober, slo.scaled(k), k, sized[0].sustained or start, CURVE_RESOLUTION))
    if progress:
        main = sized[0].sustained
        found = f"{main:,.3g} {traffic.unit}" if main is not None else "SLO not met"
        progress(f"{config.label}: {found} ({len(prober.probes)} probes, {time.perf_counter() - t0:.1f} s)")
    return Capacity(config, start, sized, list(prober.probes.values()), time.perf_counter() - t0)
