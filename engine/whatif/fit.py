"""Fitting the estimator's factors to measured runs, with leave-one-out error bands.

Levenberg-Marquardt on log(predicted / measured) of TTFT and TPOT, with a weak pull
toward the documented priors (so factors the runs do not constrain stay sensible).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.whatif.estimate import Band
from engine.whatif.points import Point
from engine.whatif.roofline import Factors, Work, phase_times, prior

REGULARIZATION = 1e-4  # weight of log(factor / prior) residuals next to log-error residuals
_FACTOR_NAMES = (
    "eff_bandwidth",
    "eff_compute_prefill",
    "eff_compute_decode",
    "step_overhead_ms",
    "prefill_overhead_ms",
)


@dataclass(frozen=True)
class Held:
    """A leave-one-out prediction of one run."""

    run_id: int
    ttft_pred_ms: float
    ttft_meas_ms: float
    tpot_pred_ms: float
    tpot_meas_ms: float

    @property
    def ttft_err(self) -> float:
        return self.ttft_pred_ms / self.ttft_meas_ms - 1

    @property
    def tpot_err(self) -> float:
        return self.tpot_pred_ms / self.tpot_meas_ms - 1


@dataclass(frozen=True)
class GroupFit:
    """Factors fitted for one group of comparable runs: engine, device kind, weight and KV
    precision and quantization method (kernels differ, so methods are never mixed)."""

    engine: str
    device_kind: str
    dtype: str
    device_name: str
    factors: Factors
    run_ids: list[int]
    band: Band | None
    held_out: list[Held] = field(default_factory=list)
    kv: str = ""
    method: str = ""

    @property
    def recipe_label(self) -> str:
        """e.g. ``transformers/fp32`` or ``transformers/int4 (gptq), kv fp32``."""
        text = f"{self.engine}/{self.dtype}" + (f" ({self.method})" if self.method else "")
        return text + (f", kv {self.kv}" if self.kv and self.kv != self.dtype else "")

    @property
    def label(self) -> str:
        band = (
            f"LOO median error TTFT ±{self.band.ttft_pct:.0f} %, TPOT ±{self.band.tpot_pct:.0f} %"
            if self.band
            else "too few runs for a held-out error"
        )
        return f"calibrated on {len(self.run_ids)} {self.recipe_label} run(s) on {self.device_name}; {band}"


def _to_factors(x: np.ndarray) -> Factors:
    v = np.exp(np.clip(x, -12, 12))
    return Factors(*(float(a) for a in v))


def _to_x(f: Factors) -> np.ndarray:
    return np.log(np.array([max(getattr(f, n), 1e-3) for n in _FACTOR_NAMES], dtype=float))


def _residuals(x: np.ndarray, works: list[Work], meas: np.ndarray, x0: np.ndarray) -> np.ndarray:
    f = _to_factors(x)
    out = []
    for w, (ttft, tpot) in zip(works, meas, strict=True):
        t, p, _, _ = phase_times(w, f)
        out.append(np.log(t * 1e3 / ttft))
        out.append(np.log(p * 1e3 / tpot))
    return np.concatenate([np.array(out), np.sqrt(REGULARIZATION) * (x - x0)])


def fit_factors(
    works: list[Work], measured_ms: list[tuple[float, float]], start: Factors, iterations: int = 80
) -> Factors:
    """Factors minimizing squared log-errors of (TTFT, TPOT) with a pull toward ``start``.

    Levenberg-Marquardt with a numerical Jacobian (5 parameters, a handful of runs).
    """
    meas = np.array(measured_ms, dtype=float)
    x0 = _to_x(start)
    x = x0.copy()
    r = _residuals(x, works, meas, x0)
    cost = float(r @ r)
    lam = 1e-2
    for _ in range(iterations):
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            dx = np.zeros_like(x)
            dx[j] = 1e-5
            jac[:, j] = (_residuals(x + dx, works, meas, x0) - r) / 1e-5
        a, g = jac.T @ jac, jac.T @ r
        improved = False
        while lam < 1e10:
            step = np.linalg.solve(a + lam * (np.diag(np.diag(a)) + 1e-9 * np.eye(x.size)), -g)
            xn = x + step
            rn = _residuals(xn, works, meas, x0)
            cn = float(rn @ rn)
            if cn < cost:
                improved = cost - cn > 1e-12
                x, r, cost, lam = xn, rn, cn, max(lam / 3, 1e-9)
                break
            lam *= 4
        if not improved:
            break
    return _to_factors(x)


def _band(held: list[Held]) -> Band | None:
    if not held:
        return None
    t = np.abs([h.ttft_err for h in held]) * 100
    p = np.abs([h.tpot_err for h in held]) * 100
    return Band(
        ttft_pct=float(np.median(t)),
        tpot_pct=float(np.median(p)),
        ttft_p90_pct=float(np.percentile(t, 90)),
        tpot_p90_pct=float(np.percentile(p, 90)),
        n_runs=len(held),
    )


def fit_group(points: list[Point]) -> GroupFit:
    """Fit one group's factors on all its runs and its leave-one-out band."""
    first = points[0]
    start = prior(first.engine, first.device_kind)
    works = [p.work() for p in points]
    meas = [(p.ttft_ms, p.tpot_ms) for p in points]
    factors = fit_factors(works, meas, start)
    held: list[Held] = []
    if len(points) >= 2:
        for i, p in enumerate(points):
            f = fit_factors(works[:i] + works[i + 1 :], meas[:i] + meas[i + 1 :], start)
            t, s, _, _ = phase_times(works[i], f)
            held.append(Held(p.run_id, t * 1e3, p.ttft_ms, s * 1e3, p.tpot_ms))
    return GroupFit(
        engine=first.engine,
        device_kind=first.device_kind,
        dtype=first.dtype,
        device_name=first.hardware.name,
        factors=factors,
        run_ids=[p.run_id for p in points],
        band=_band(held),
        held_out=held,
        kv=first.kv,
        method=first.method,
    )
