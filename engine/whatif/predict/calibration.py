"""Calibrations of the serving simulator from stored runs, and which one a prediction uses, in words.

A group is one what-if family (``vllm`` and ``vllm-server`` share one; ``transformers`` another) on one
measured device (its micro-benchmark's hardware entry: ``local:cpu`` for this machine's CPU) with one
recipe in calibration terms (weight and KV precision, quantization method, speculative decoding:
:class:`~engine.whatif.predict.deployment.Terms`). Its step costs are fitted on its runs and its band is
their leave-one-out error (:mod:`engine.whatif.predict.fitting`).

A prediction for a recipe on a hardware entry takes, in order: the group of that recipe on that very
hardware ("calibrated from 3 runs on <cpu>"); the same recipe measured on other hardware, carried by the
roofline ("calibrated from 3 runs on <cpu>, carried to H100 by roofline": the efficiencies and host
overheads kept, the bandwidth, FLOP/s, memory and interconnect the target's); another recipe of the same
family, carried (the label names both); else the family's uncalibrated priors on the bare roofline, which
claim no band. A band carried to other hardware is the calibration hardware's, and the label says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.whatif.hardware import Hardware
from engine.whatif.predict.deployment import Terms, deployment, with_acceptance
from engine.whatif.predict.fitting import (
    HeldOut,
    Pair,
    ServingBand,
    band_of,
    fit_costs,
    leave_one_out,
    prior_costs,
)
from engine.whatif.predict.observed import Observed, collect_observed
from engine.whatif.predict.replay import PlanUnavailable, case_of
from engine.whatif.serving import ConfigError, StepCosts

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject
    from storage import Database

Progress = Callable[[str], None]
MAX_RUNS = 6  # runs per group fitted (the newest): each fit simulates every one of them many times


@dataclass(frozen=True)
class GroupFit:
    """Step costs fitted to one group's runs, and their leave-one-out band."""

    terms: Terms
    hardware: Hardware
    costs: StepCosts
    prior: StepCosts
    run_ids: list[int]
    band: ServingBand | None
    held_out: list[HeldOut] = field(default_factory=list)
    acceptance: float | None = None  # speculative decoding's mean measured acceptance

    @property
    def label(self) -> str:
        return f"calibrated from {len(self.run_ids)} run{'s' if len(self.run_ids) != 1 else ''} on {self.hardware.name}"


@dataclass(frozen=True)
class Calibrated:
    """What a prediction uses: costs, band (None: none claimed), its label, and where they came from."""

    costs: StepCosts
    band: ServingBand | None
    label: str
    fit: GroupFit | None = None
    carried: bool = False
    skipped: list[tuple[int, str]] = field(default_factory=list)

    @property
    def calibrated(self) -> bool:
        return self.fit is not None

    def to_dict(self) -> JSONObject:
        return {
            "label": self.label,
            "calibrated": self.calibrated,
            "carried": self.carried,
            "band": self.band.to_dict() if self.band else None,
            "costs": self.costs.to_dict(),
            "calibration_runs": self.fit.run_ids if self.fit else [],
            "calibration_hardware": self.fit.hardware.key if self.fit else None,
        }


def pair_of(observed: Observed) -> Pair | str:
    """A run and its case on the hardware it ran on, or why it cannot be simulated."""
    try:
        dep = deployment(observed.spec, observed.hardware, observed.shape, applied=observed.applied)
        dep = with_acceptance(dep, observed.acceptance or 0.0)
        return Pair(observed, case_of(observed.spec, dep))
    except (PlanUnavailable, ConfigError, ValueError) as exc:
        return f"cannot be simulated: {exc}"


def fit_group(pairs: Sequence[Pair], progress: Progress | None = None) -> GroupFit:
    """Fit one group's costs on all its runs, and its leave-one-out band."""
    first = pairs[0].observed
    prior = prior_costs(first.terms.family, first.hardware.kind)
    say = progress or (lambda _m: None)
    say(f"fitting {first.terms.words} on {first.hardware.name}: {len(pairs)} run(s)")
    costs = fit_costs(pairs, prior)
    held = leave_one_out(pairs, prior, say)
    rates = [p.observed.acceptance for p in pairs if p.observed.acceptance is not None]
    return GroupFit(
        terms=first.terms,
        hardware=first.hardware,
        costs=costs,
        prior=prior,
        run_ids=[p.observed.run_id for p in pairs],
        band=band_of(held),
        held_out=held,
        acceptance=sum(rates) / len(rates) if rates else None,
    )


def _ranked(found: Sequence[Observed], terms: Terms, target: Hardware) -> list[tuple[list[Observed], str]]:
    """Candidate groups, best first: (runs, how they relate to the target) (module doc)."""
    groups: dict[tuple[str, Terms], list[Observed]] = {}
    for o in found:
        groups.setdefault((o.hardware.key, o.terms), []).append(o)
    order = []
    for (key, t), runs in groups.items():
        same_recipe = t == terms
        rank = (key != target.key, runs[0].hardware.kind != target.kind, not same_recipe, -len(runs))
        note = "" if same_recipe else f" (recipe {t.words}; {terms.words} not measured)"
        order.append((rank, runs, note))
    return [(runs, note) for _, runs, note in sorted(order, key=lambda item: item[0])]


def calibration_for(
    db: Database | None,
    terms: Terms,
    target: Hardware,
    run_ids: list[int] | None = None,
    progress: Progress | None = None,
    fits: dict[tuple[int, ...], GroupFit] | None = None,
) -> Calibrated:
    """The calibration a prediction of ``terms`` on ``target`` uses (module doc), fitted now from the
    database's measured runs of the family (or only ``run_ids``); the priors when none can be used.
    ``fits`` keeps the groups fitted by run ids, so several targets of one plan fit each group once."""
    found, skipped = collect_observed(db, terms.family, run_ids) if db is not None else ([], [])
    for runs, note in _ranked(found, terms, target):
        pairs, bad = [], []
        for o in sorted(runs, key=lambda o: -o.run_id)[:MAX_RUNS]:
            got = pair_of(o)
            (bad.append((o.run_id, got)) if isinstance(got, str) else pairs.append(got))
        skipped += bad
        if pairs:
            key = tuple(p.observed.run_id for p in pairs)
            fit = fits[key] if fits is not None and key in fits else fit_group(pairs, progress)
            if fits is not None:
                fits[key] = fit
            return calibrated(fit, target, note, skipped)
    return uncalibrated(terms, target, skipped)


def calibrated(fit: GroupFit, target: Hardware, note: str = "", skipped: list | None = None) -> Calibrated:
    """A fit used for ``target``: on its own hardware, or carried by the roofline (the label says which)."""
    carried = fit.hardware.key != target.key
    label = fit.label
    if carried:
        label += f", carried to {target.name} by roofline"
        if fit.hardware.kind != target.kind:
            label += f" (host overheads measured on a {fit.hardware.kind}, not a {target.kind})"
    band = fit.band
    label += "; " + (band.words + (f" on {fit.hardware.name}" if carried else "") if band else "one run: no band")
    return Calibrated(fit.costs, band, label + note, fit, carried, list(skipped or []))


def uncalibrated(terms: Terms, target: Hardware, skipped: list | None = None) -> Calibrated:
    """The family's priors on the bare roofline of ``target``: no band claimed."""
    costs = prior_costs(terms.family, target.kind)
    label = (
        f"uncalibrated: no measured {terms.family} run to calibrate from, so the roofline of {target.name} "
        f"with the documented {terms.family} priors; no error band claimed"
    )
    return Calibrated(costs, None, label, None, False, list(skipped or []))
