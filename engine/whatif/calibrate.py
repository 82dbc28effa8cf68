"""Calibration of the what-if estimator from measured runs, with leave-one-out error bands.

For every finished run in the database whose model shape, workload and device are
known, the estimator's :class:`~engine.whatif.estimate.Work` is computed against the *measured*
figures of the device it ran on (from :mod:`engine.whatif.microbench`). Runs are grouped by
(engine, device kind, weight precision); per group, the five :class:`Factors` are fitted
by damped Gauss-Newton on log(predicted / measured) of TTFT and TPOT, with a weak pull
toward the documented priors (so factors the runs do not constrain stay sensible).
Each group's error band is the leave-one-out error: every run is predicted by factors
fitted without it. Factors are then carried to catalog hardware: same kind and
precision first, then the same kind, then any, and the label says which.

Pure: reads the database through storage façades; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.whatif.estimate import (
    Band,
    Estimate,
    EstimateError,
    EstimateRecipe,
    EstimateWorkload,
    Factors,
    ModelShape,
    Work,
    estimate,
    model_shape,
    normalize_dtype,
    phase_times,
    prior,
    resolve_dtypes,
    work,
)
from engine.whatif.hardware import Hardware, from_measurement

REGULARIZATION = 1e-4  # weight of log(factor / prior) residuals next to log-error residuals
_FACTOR_NAMES = (
    "eff_bandwidth",
    "eff_compute_prefill",
    "eff_compute_decode",
    "step_overhead_ms",
    "prefill_overhead_ms",
)


@dataclass(frozen=True)
class Point:
    """One measured run, reduced to what the estimator needs."""

    run_id: int
    engine: str
    device: str
    device_kind: str
    dtype: str
    source: str
    shape: ModelShape
    prompt_tokens: int
    output_tokens: int
    batch_size: int
    ttft_ms: float
    tpot_ms: float
    hardware: Hardware

    def work(self) -> Work:
        recipe = EstimateRecipe(engine=self.engine, dtype=self.dtype, batch_size=self.batch_size)
        return work(self.shape, self.hardware, recipe, self.prompt_tokens, self.output_tokens, self.batch_size)


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
    """Factors fitted for one (engine, device kind, precision) group of runs."""

    engine: str
    device_kind: str
    dtype: str
    device_name: str
    factors: Factors
    run_ids: list[int]
    band: Band | None
    held_out: list[Held] = field(default_factory=list)

    @property
    def label(self) -> str:
        band = (
            f"LOO median error TTFT ±{self.band.ttft_pct:.0f} %, TPOT ±{self.band.tpot_pct:.0f} %"
            if self.band
            else "too few runs for a held-out error"
        )
        return f"calibrated on {len(self.run_ids)} {self.engine}/{self.dtype} run(s) on {self.device_name}; {band}"


@dataclass(frozen=True)
class Calibration:
    """All group fits, and the runs that could not be used (with reasons)."""

    groups: list[GroupFit]
    skipped: list[tuple[int, str]] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    @property
    def calibrated(self) -> bool:
        return bool(self.groups)

    def for_target(self, engine: str, kind: str, dtype: str) -> tuple[Factors, Band | None, str]:
        """Factors, band and a label for an estimate of ``engine`` on hardware of ``kind``."""
        if engine == "ideal":
            return prior(engine, kind), None, "bare roofline: data-sheet peaks, no overhead (a floor, not a forecast)"
        mine = [g for g in self.groups if g.engine == engine]
        for pick, how in (
            ([g for g in mine if g.device_kind == kind and g.dtype == dtype], ""),
            ([g for g in mine if g.device_kind == kind], f" (carried to {dtype}: that precision not measured)"),
        ):
            if pick:
                best = max(pick, key=lambda g: len(g.run_ids))
                return best.factors, best.band, best.label + how
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


# -- collecting runs ---------------------------------------------------------------------
def _dtype_of(spec: dict[str, Any], prov: dict[str, Any], device: str) -> str:
    applied = (prov.get("applied") or {}).get("dtype")
    name = applied or (spec.get("recipe") or {}).get("dtype") or "auto"
    if name == "auto":
        return "fp32" if device == "cpu" else "bf16"
    return normalize_dtype(str(name), ("fp32", "bf16", "fp16", "fp8", "int8", "int4"))


def collect_points(db: Any, limit: int = 2000) -> tuple[list[Point], list[tuple[int, str]]]:
    """Measured runs usable for calibration, and (run id, reason) for the others."""
    from storage.hardware import list_measurements
    from storage.runs import get_run, list_runs

    measurements = list_measurements(db, limit=500)
    points: list[Point] = []
    skipped: list[tuple[int, str]] = []
    for summary in list_runs(db, limit=limit, status="done"):
        run = get_run(db, summary.id)
        if run is None:
            continue
        spec, prov, metrics = run.spec or {}, run.provenance or {}, run.metrics or {}
        wl = spec.get("workload") or {}
        ttft = (metrics.get("ttft_ms") or {}).get("p50")
        tpot = (metrics.get("tpot_ms") or {}).get("p50")
        if not ttft or not tpot:
            skipped.append((run.id, "no TTFT/TPOT (needs at least 2 output tokens)"))
            continue
        if not wl.get("prompt_tokens"):
            skipped.append((run.id, "prompt file workload: prompt length not fixed"))
            continue
        device = run.device.split(",")[0]
        if "," in run.device:
            skipped.append((run.id, "multi-device run: not used for calibration yet"))
            continue
        host = prov.get("host")
        match = [m for m in measurements if m.device == device and m.host == host] or [
            m for m in measurements if m.device == device
        ]
        if not match:
            skipped.append((run.id, f"no micro-benchmark of {device} (run: python -m engine calibrate)"))
            continue
        source = (spec.get("model") or {}).get("source", run.model)
        try:
            shape = model_shape(source)
            dtype = _dtype_of(spec, prov, device)
        except EstimateError as exc:
            skipped.append((run.id, str(exc)))
            continue
        hw = from_measurement(match[0])
        points.append(
            Point(
                run_id=run.id,
                engine=run.engine,
                device=device,
                device_kind=hw.kind,
                dtype=dtype,
                source=source,
                shape=shape,
                prompt_tokens=int(wl["prompt_tokens"]),
                output_tokens=int(wl.get("output_tokens", 32)),
                batch_size=int(wl.get("batch_size", 1)),
                ttft_ms=float(ttft),
                tpot_ms=float(tpot),
                hardware=hw,
            )
        )
    return points, skipped


# -- fitting -------------------------------------------------------------------------------
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
    )


def fit_points(points: list[Point], skipped: list[tuple[int, str]] | None = None) -> Calibration:
    """Group points by (engine, device kind, precision) and fit each group."""
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in points:
        groups.setdefault((p.engine, p.device_kind, p.dtype), []).append(p)
    return Calibration(groups=[fit_group(g) for g in groups.values()], skipped=list(skipped or []), points=list(points))


def calibrate(db: Any | None) -> Calibration:
    """Fit everything the database's runs allow; an empty calibration when there are none."""
    if db is None:
        return Calibration(groups=[])
    points, skipped = collect_points(db)
    return fit_points(points, skipped)


# -- what-if over several hardware entries ------------------------------------------------
@dataclass(frozen=True)
class Measured:
    """A stored run that matches the what-if question, to overlay on its device's estimate."""

    run_id: int
    hardware: str
    ttft_ms: float
    tpot_ms: float


@dataclass(frozen=True)
class WhatIf:
    """Estimates for several hardware entries, and the measured runs that match."""

    estimates: list[Estimate]
    measured: list[Measured]
    calibration: Calibration


def what_if(
    shape: ModelShape,
    source: str,
    hardware: list[Hardware],
    recipe: EstimateRecipe,
    workload: EstimateWorkload,
    db: Any | None = None,
    calibration: Calibration | None = None,
) -> WhatIf:
    """Calibrated estimates for each hardware entry plus matching measured runs."""
    cal = calibration if calibration is not None else calibrate(db)
    estimates = []
    for hw in hardware:
        weight, _ = resolve_dtypes(recipe, hw)
        factors, band, label = cal.for_target(recipe.engine, hw.kind, weight)
        estimates.append(estimate(shape, hw, recipe, workload, factors, label, band))
    measured: list[Measured] = []
    if cal.points or db is not None:
        points = cal.points if cal.points else collect_points(db)[0]
        keys = {e.hardware for e in estimates}
        for p in points:
            hw_key = p.hardware.key
            if (
                hw_key in keys
                and p.source == source
                and p.engine == recipe.engine
                and p.batch_size == recipe.batch_size
                and p.prompt_tokens == workload.prompt_tokens
                and p.output_tokens == workload.output_tokens
                and p.dtype == resolve_dtypes(recipe, p.hardware)[0]
                and recipe.tp == 1
            ):
                measured.append(Measured(p.run_id, hw_key, p.ttft_ms, p.tpot_ms))
    return WhatIf(estimates=estimates, measured=measured, calibration=cal)


def table_rows(w: WhatIf) -> list[dict[str, Any]]:
    """One flat row per hardware entry: the table the CLI prints and the page shows."""
    gb = 1e9
    rows = []
    for e in w.estimates:
        meas = [m for m in w.measured if m.hardware == e.hardware]
        band = e.band
        rows.append(
            {
                "hardware": e.hardware,
                "name": e.hardware_name,
                "fits": e.fits,
                "memory_gb": e.memory.total / gb,
                "usable_gb": e.memory.usable / gb,
                "weights_gb": e.memory.weights / gb,
                "kv_gb": e.memory.kv_total / gb,
                "kv_per_token_kb": e.memory.kv_per_token / 1024,
                "activations_gb": e.memory.activations / gb,
                "overhead_gb": e.memory.overhead / gb,
                "ttft_ms": e.ttft_ms,
                "tpot_ms": e.tpot_ms,
                "output_tokens_per_s": e.output_tokens_per_s,
                "max_batch": e.max_batch,
                "max_context": e.max_context,
                "bound": f"{e.prefill_bound}/{e.decode_bound}",
                "precision": f"{e.weight_dtype} w, {e.kv_dtype} kv, {e.compute_precision} math",
                "band_ttft_pct": None if band is None else band.ttft_pct,
                "band_tpot_pct": None if band is None else band.tpot_pct,
                "measured_ttft_ms": float(np.median([m.ttft_ms for m in meas])) if meas else None,
                "measured_tpot_ms": float(np.median([m.tpot_ms for m in meas])) if meas else None,
                "measured_runs": [m.run_id for m in meas],
                "calibration": e.calibration,
                "notes": "; ".join(e.notes),
            }
        )
    return rows
