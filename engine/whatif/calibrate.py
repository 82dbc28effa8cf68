"""Calibration of the what-if estimator from measured runs, with leave-one-out error bands.

For every finished run in the database whose model shape, workload and device are
known and whose recipe the estimator models (:mod:`engine.whatif.admit`; the others are
left out with their reason), the estimator's :class:`~engine.whatif.estimate.Work` is
computed against the *measured* figures of the device it ran on (from
:mod:`engine.whatif.microbench`). Runs are grouped by (engine, device kind, weight
precision, KV precision, quantization method); per group, the five :class:`Factors` are fitted
by damped Gauss-Newton on log(predicted / measured) of TTFT and TPOT, with a weak pull
toward the documented priors (so factors the runs do not constrain stay sensible).
Each group's error band is the leave-one-out error: every run is predicted by factors
fitted without it. Factors are then carried to catalog hardware: same kind and
precision first, then the same kind, then any, and the label says which.

Pure: reads the database through storage façades; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.whatif.admit import left_out_summary
from engine.whatif.estimate import Band
from engine.whatif.fit import GroupFit, fit_group
from engine.whatif.points import Point, collect_points
from engine.whatif.roofline import Factors, prior

if TYPE_CHECKING:
    from storage import Database


@dataclass(frozen=True)
class Calibration:
    """All group fits, and the runs that could not be used (with reasons)."""

    groups: list[GroupFit]
    skipped: list[tuple[int, str]] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    @property
    def calibrated(self) -> bool:
        return bool(self.groups)

    def group_for(self, engine: str, kind: str, dtype: str, kv: str | None = None) -> tuple[GroupFit | None, bool]:
        """(the group an estimate of ``engine`` on ``kind`` hardware uses, whether carried from another precision).

        First a group of the same weight (and KV, when given) precision, plain weights
        before a quantization method; then the same kind's plain group, carried.
        """
        here = [g for g in self.groups if g.engine == engine and g.device_kind == kind]
        same = [g for g in here if g.dtype == dtype and (kv is None or g.kv == kv)]
        for pick, carried in ((same, False), (here, True)):
            if pick:
                return max(pick, key=lambda g: (not g.method, len(g.run_ids))), carried
        return None, False

    def for_target(self, engine: str, kind: str, dtype: str, kv: str | None = None) -> tuple[Factors, Band | None, str]:
        """Factors, band and a label for an estimate of ``engine`` on hardware of ``kind`` (see :meth:`group_for`)."""
        if engine == "ideal":
            return prior(engine, kind), None, "bare roofline: data-sheet peaks, no overhead (a floor, not a forecast)"
        best, carried = self.group_for(engine, kind, dtype, kv)
        target = dtype if kv is None else f"{dtype} w / {kv} kv"
        if best is not None:
            how = f" (carried to {target}: that precision not measured)" if carried else ""
            return best.factors, best.band, best.label + how
        mine = [g for g in self.groups if g.engine == engine]
        if mine:
            # A CPU's per-step overhead is host compute, a GPU's is kernel launches: they do not transfer.
            other = ", ".join(sorted({g.device_kind for g in mine}))
            return (
                prior(engine, kind),
                None,
                (
                    f"uncalibrated on {kind}: {engine} runs measured only on {other}, "
                    "whose factors do not transfer; documented priors"
                ),
            )
        return prior(engine, kind), None, f"uncalibrated (no measured {engine} runs; documented priors)"

    @property
    def left_out(self) -> str:
        """ "N runs left out: 3 speculative decoding (not modelled), ..." ("" when none)."""
        return left_out_summary(self.skipped)


def fit_points(points: list[Point], skipped: list[tuple[int, str]] | None = None) -> Calibration:
    """Group comparable points (engine, device kind, weight and KV precision, method) and fit each group."""
    groups: dict[tuple[str, str, str, str, str], list[Point]] = {}
    for p in points:
        groups.setdefault((p.engine, p.device_kind, p.dtype, p.kv, p.method), []).append(p)
    return Calibration(groups=[fit_group(g) for g in groups.values()], skipped=list(skipped or []), points=list(points))


def calibrate(db: Database | None) -> Calibration:
    """Fit everything the database's runs allow; an empty calibration when there are none."""
    if db is None:
        return Calibration(groups=[])
    points, skipped = collect_points(db)
    return fit_points(points, skipped)
