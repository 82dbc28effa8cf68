"""The capacity check of benchmarks/simulator_accuracy.py: the highest rate one replica sustains within an SLO,
as the capacity planner answers it (simulation under the calibration runs' fit) against the same rate read
off the measured Poisson runs.

The measured capacity under "figure pN <= L" is where the measured figure crosses L, linearly interpolated
between the two neighbouring measured rates (the first measurement of each Poisson run, calibration's p60
included: its figure is measured like the others); the same crossing of the measured intervals' upper and
lower ends gives the band the measurement allows. Only figures that rise with the rate across the measured
runs can be read this way: TPOT and E2E latency do here, TTFT p90 does not (it moves with moments the server
lost the CPU more than with load below saturation), so no TTFT capacity is claimed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

POISSON = ("p50", "p60", "p75", "p85", "p95")  # first measurements only (the -again repeats are the noise floor)
SLOS = {  # figure -> limits (ms) stated before reading the runs: steps across the measured range
    "tpot_p90": (120.0, 130.0, 140.0, 150.0),
    "e2el_p90": (4000.0, 4500.0, 5000.0),
}
TARGET_PCT = 5.0


def _say(text: str = "") -> None:
    print(text, flush=True)


def crossing(rates: list[float], values: list[float], limit: float) -> float | None:
    """The rate where ``values`` (at increasing ``rates``) first exceed ``limit``, interpolated from the last
    rate within it; None when the first rate already exceeds it or none does (the crossing is not measured)."""
    for i in range(1, len(rates)):
        if values[i] > limit >= values[i - 1]:
            share = (limit - values[i - 1]) / (values[i] - values[i - 1])
            return rates[i - 1] + share * (rates[i] - rates[i - 1])
        if values[i - 1] > limit:
            return None
    return None


def measured_points(db: Any, ids: dict[str, int], figure: str) -> list[tuple[float, float, float, float]]:
    """(rate, value, interval low, interval high) of ``figure`` for each measured Poisson run, by rate."""
    from storage.runs import get_run

    points = []
    group, stat = {"tpot_p90": ("tpot_ms", "p90"), "e2el_p90": ("e2el_ms", "p90")}[figure]
    for name in POISSON:
        if name not in ids:
            continue
        metrics = get_run(db, ids[name]).metrics or {}
        rate = (metrics.get("load") or {}).get("configured_rate")
        block = metrics.get(group) or {}
        value, ci = block.get(stat), (block.get("ci") or {}).get(stat)
        if rate and value is not None:
            low, high = ci if ci else (value, value)
            points.append((float(rate), float(value), float(low), float(high)))
    return sorted(points)


def _predicted(db: Any, spec: dict[str, Any], cal: Any, slos: list[Any]) -> list[tuple[float | None, str]]:
    """The planner's sustained rate (and its search's words) for each SLO, on this machine under ``cal``."""
    from engine.spec import parse_job_spec
    from engine.whatif.capacity.configs import Variant, prepared
    from engine.whatif.capacity.sizing import size
    from engine.whatif.hardware import catalog, get_hardware

    hw = get_hardware("local:cpu", catalog(db))
    ready = prepared(parse_job_spec(spec), [Variant("base")], [hw], [None], lambda _terms, _hw: cal)
    if not ready.configs:
        raise SystemExit(f"capacity check: {ready.left_out[0].reason}")
    out = []
    for slo in slos:
        sized = size(ready.configs[0], ready.traffic, slo).main
        out.append((sized.sustained, sized.bracket.why))
    return out


def capacity_accuracy(db: Any, ids: dict[str, int], spec: dict[str, Any], cal: Any) -> dict[str, Any]:
    """Predicted against measured capacity under each SLO of :data:`SLOS`; printed, and returned."""
    from engine.whatif.capacity.slo import CapacitySLO

    _say("\ncapacity: the highest Poisson rate one replica sustains within an SLO (requests/s), planner vs measured")
    _say(f"  {'SLO':<22}{'predicted':>10}{'measured':>10}  {'measured band':<16}{'error':>8}")
    rows: list[dict[str, Any]] = []
    for figure, limits in SLOS.items():
        points = measured_points(db, ids, figure)
        if len(points) < 2:
            _say(f"  {figure}: fewer than 2 measured Poisson runs")
            continue
        rates = [p[0] for p in points]
        key = {"tpot_p90": "tpot_ms", "e2el_p90": "e2el_ms"}[figure]
        slos = [CapacitySLO(**{key: limit}, percentile=90.0) for limit in limits]
        predicted = _predicted(db, spec, cal, slos)
        for limit, slo, (pred, why) in zip(limits, slos, predicted, strict=True):
            meas = crossing(rates, [p[1] for p in points], limit)
            band = (crossing(rates, [p[3] for p in points], limit), crossing(rates, [p[2] for p in points], limit))
            err = 100.0 * (pred / meas - 1) if pred is not None and meas else None
            band_text = "[" + ", ".join("-" if b is None else f"{b:.3f}" for b in band) + "]"
            _say(
                f"  {slo.words():<22}{'-' if pred is None else f'{pred:.3f}':>10}"
                f"{'-' if meas is None else f'{meas:.3f}':>10}  {band_text:<16}"
                f"{'-' if err is None else f'{err:+.1f} %':>8}"
            )
            rows.append({"slo": slo.words(), "predicted": pred, "measured": meas, "band": band, "error_pct": err,
                         "search": why})  # fmt: skip
    errors = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    median = float(np.median(errors)) if errors else None
    verdict = "-" if median is None else ("met" if median <= TARGET_PCT else "MISSED")
    _say(f"  median |error| {'-' if median is None else f'{median:.1f}'} % (target <= {TARGET_PCT:g} %): {verdict}")
    _say(f"  measured at {', '.join(f'{r:.3f}' for r in rates)} requests/s (TPOT/E2E p90 cross between them)")
    print("  (TTFT p90 does not rise with load across these runs: no TTFT capacity is read off them)", file=sys.stderr)
    return {"rows": rows, "median_error_pct": median}


def poisson_spec(runs: list[Any], capacity: float) -> dict[str, Any]:
    """The held-out Poisson runs' spec (any of them: the planner sets the rate)."""
    by_name = {p.name: p for p in runs}
    return by_name["p75"].spec(capacity, Path("."))
