"""The tables of benchmarks/simulator_accuracy.py: each group calibrated on its calibration runs only, each
held-out run predicted and printed beside its measurement, the errors by load level, the noise floor and
the median errors against the targets."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

FIGURES = (  # key, label, how its error is stated ("pct": relative, "pts": percentage points)
    ("ttft_p50", "TTFT p50 ms", "pct"),
    ("ttft_p90", "TTFT p90 ms", "pct"),
    ("ttft_p99", "TTFT p99 ms", "pct"),
    ("tpot_p50", "TPOT p50 ms", "pct"),
    ("tpot_p90", "TPOT p90 ms", "pct"),
    ("e2el_p90", "E2E p90 ms", "pct"),
    ("throughput", "output tok/s", "pct"),
    ("slo", "SLO attainment %", "pts"),
    ("hit_rate", "prefix hit rate %", "pts"),
    ("preemptions", "preemptions", "abs"),
)
TARGETS = {"ttft_p50": 10.0, "ttft_p90": 10.0, "e2el_p90": 7.5, "tpot_p50": 5.0, "throughput": 2.5, "slo": 2.0}
_GROUPS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms"}


def _say(text: str = "") -> None:
    print(text, flush=True)


def _group_value(metrics: dict[str, Any], key: str) -> tuple[float | None, list[float] | None]:
    """A figure of a metrics dict and its 95 % interval where stored."""
    if key == "throughput":
        ci = (metrics.get("ci") or {}).get("output_tokens_per_s")
        return metrics.get("output_tokens_per_s"), ci
    name, stat = key.split("_")
    group = metrics.get(_GROUPS[name]) or {}
    return group.get(stat), (group.get("ci") or {}).get(stat)


def _attainment(records: list[Any], slo: dict[str, float]) -> float | None:
    from engine.measure.stamps import SLO, meets_slo

    measured = [r for r in records if not r.warmup]
    if not measured:
        return None
    target = SLO(ttft_ms=slo["ttft_ms"], tpot_ms=slo["tpot_ms"], e2el_ms=None)
    return 100.0 * sum(1 for r in measured if r.ok and meets_slo(r, target)) / len(measured)


def figures(metrics: dict[str, Any], records: list[Any], hit: float | None, pre: float | None, slo: dict) -> dict:
    """Every figure of one run (predicted or measured): value and interval."""
    out: dict[str, tuple[float | None, list[float] | None]] = {}
    for key, _, _ in FIGURES[:7]:
        out[key] = _group_value(metrics, key)
    out["slo"] = (_attainment(records, slo), None)
    out["hit_rate"] = (None if hit is None else 100.0 * hit, None)
    out["preemptions"] = (pre, None)
    return out


def _error(kind: str, pred: float | None, meas: float | None) -> float | None:
    if pred is None or meas is None:
        return None
    if kind == "pct":
        return 100.0 * (pred / meas - 1) if meas else None
    return pred - meas


def _calibrate(db: Any, hw: Any, run_ids: list[int], label: str) -> Any:
    from engine.whatif.predict.calibration import calibration_for
    from engine.whatif.predict.observed import collect_observed

    found, skipped = collect_observed(db, None, run_ids)
    if skipped:
        _say(f"  {label}: runs left out of the calibration: {skipped}")
    if not found:
        return None
    cal = calibration_for(db, found[0].terms, hw, run_ids, progress=lambda m: print("  " + m, file=sys.stderr))
    _say(f"{label}: {cal.label}")
    _say(f"  fitted costs: {', '.join(f'{k}={v:.3g}' for k, v in cal.costs.to_dict().items())}")
    return cal


def predict_run(db: Any, run_id: int, cal: Any, slo: dict) -> dict[str, Any] | None:
    """One stored run predicted under ``cal``: its figures, predicted and measured."""
    from engine.whatif.predict.calibration import pair_of
    from engine.whatif.predict.observed import collect_observed
    from engine.whatif.predict.replay import case_metrics, case_records, simulate_case

    observed, skipped = collect_observed(db, None, [run_id])
    found = observed[0] if observed else None
    pair = pair_of(found) if found is not None else str(skipped)
    if isinstance(pair, str):
        _say(f"  run {run_id} cannot be predicted: {pair}")
        return None
    result = simulate_case(pair.case, cal.costs)
    records, start, end = case_records(pair.case, result)
    metrics = case_metrics(pair.case, records, start, end, result.due_times)
    o = found
    pred = figures(metrics, records, result.stats.prefix_hit_rate, float(result.stats.preemptions), slo)
    meas = figures(o.metrics, o.records, o.counters.get("prefix_hit_rate"), o.counters.get("preemptions"), slo)
    return {
        "run_id": run_id,
        "predicted": pred,
        "measured": meas,
        "steps": (result.stats.steps, o.counters.get("steps")),
    }


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def print_run(name: str, title: str, row: dict[str, Any]) -> dict[str, float | None]:
    """One held-out run's block; its errors by figure."""
    _say(
        f"\n{name}: {title} (run {row['run_id']}; engine steps sim/server {row['steps'][0]}/{_fmt(row['steps'][1], 0)})"
    )
    _say(f"  {'figure':<20}{'predicted':>12}{'measured':>12}  {'measured 95 % CI':<22}{'error':>9}")
    errors = {}
    for key, label, kind in FIGURES:
        pred, _ = row["predicted"][key]
        meas, ci = row["measured"][key]
        err = _error(kind, pred, meas)
        errors[key] = err
        if pred is None and meas is None:
            continue
        unit = {"pct": "%", "pts": "pts", "abs": ""}[kind]
        ci_text = f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else ""
        err_text = "-" if err is None else f"{err:+.1f} {unit}"
        _say(f"  {label:<20}{_fmt(pred):>12}{_fmt(meas):>12}  {ci_text:<22}{err_text:>9}")
    return errors


def _title(p: Any, capacity: float, db: Any, run_id: int) -> str:
    from storage.runs import get_run

    run = get_run(db, run_id)
    metrics = run.metrics or {}
    load = metrics.get("load") or {}
    rate = load.get("configured_rate")
    words = f"{load.get('arrival', '?')}" + (f" {rate:.2f}/s" if rate else "")
    words += f" = {p.load:.2f} x capacity" if p.load else ""
    flags = {f.get("flag"): f.get("detail", "") for f in metrics.get("noise_flags") or [] if isinstance(f, dict)}
    if "contention" in flags:  # "load 4.6 on 2 cores; other processes used 0.1 cores (...)"
        words += "; measured under contention: " + flags["contention"].split(" (")[0]
    return words


def _summary(errors: dict[str, dict[str, float | None]], runs: dict[str, Any]) -> dict[str, Any]:
    _say("\nerror by load level (Poisson/gamma runs, %):")
    _say(
        f"  {'run':<16}{'load':>6}"
        + "".join(f"{k:>12}" for k in ("ttft_p50", "ttft_p90", "tpot_p50", "e2el_p90", "throughput"))
    )
    for name, p in sorted(((n, runs[n]) for n in errors if runs[n].load), key=lambda item: item[1].load):
        e = errors[name]
        cells = "".join(f"{_fmt(e.get(k)):>12}" for k in ("ttft_p50", "ttft_p90", "tpot_p50", "e2el_p90", "throughput"))
        _say(f"  {name:<16}{p.load:>6.2f}{cells}")
    medians = {}
    _say("\nmedian |error| over the held-out runs, against the targets:")
    for key, target in TARGETS.items():
        values = [abs(e[key]) for e in errors.values() if e.get(key) is not None]
        med = float(np.median(values)) if values else None
        medians[key] = med
        unit = "pts" if key == "slo" else "%"
        verdict = "-" if med is None else ("met" if med <= target else "MISSED")
        _say(f"  {key:<12} {_fmt(med):>7} {unit:<4} (target <= {target:g} {unit}, {len(values)} runs): {verdict}")
    worst = [
        (name, key, e[key])
        for name, e in errors.items()
        if runs[name].load is not None and runs[name].load <= 0.85
        for key in ("ttft_p50", "ttft_p90", "tpot_p50", "e2el_p90", "throughput")
        if e.get(key) is not None and abs(e[key]) > 25
    ]
    _say(f"  held-out runs at <= 0.85 load off by more than 25 %: {worst or 'none'}")
    return {"medians": medians, "over_25_pct_at_or_below_085": worst}


def _noise(rows: dict[str, Any], errors: dict[str, Any], runs: dict[str, Any]) -> dict[str, Any]:
    _say("\nnoise floor: the same run measured twice (|difference| %), beside the simulator's |error| on each:")
    out = {}
    for name, p in runs.items():
        if p.role != "repeat" or name not in rows or p.repeats not in rows:
            continue
        a, b = rows[p.repeats]["measured"], rows[name]["measured"]
        for key in ("ttft_p50", "ttft_p90", "tpot_p50", "e2el_p90", "throughput"):
            diff = _error("pct", b[key][0], a[key][0])
            sims = [errors.get(n, {}).get(key) for n in (p.repeats, name)]
            out[f"{p.repeats}/{key}"] = (diff, sims)
            _say(
                f"  {p.repeats:<10}{key:<12} measured twice {_fmt(abs(diff) if diff is not None else None):>6} %"
                f"   simulator {' / '.join(_fmt(abs(s) if s is not None else None) for s in sims)} %"
            )
    return out


def report(db: Any, runs: list[Any], ids: dict[str, int], capacity: float, slo: dict[str, float]) -> dict[str, Any]:
    """Calibrate each group, predict every held-out and repeated run, print the tables; the results."""
    from engine.whatif.hardware import catalog, get_hardware

    hw = get_hardware("local:cpu", catalog(db))
    by_name = {p.name: p for p in runs}
    _say(f"\nhardware: {hw.name}; measured capacity {capacity:.3f} requests/s (concurrency 8)")
    _say(f"SLO: TTFT <= {slo['ttft_ms']:g} ms and TPOT <= {slo['tpot_ms']:g} ms")
    cals = {
        "vllm": _calibrate(db, hw, [ids[p.name] for p in runs if p.role == "cal-vllm" and p.name in ids], "vllm"),
        "transformers": _calibrate(db, hw, [ids[p.name] for p in runs if p.role == "cal-tf" and p.name in ids], "tf"),
    }
    rows, errors = {}, {}
    for p in runs:
        if p.role not in ("held", "repeat") or p.name not in ids:
            continue
        cal = cals["transformers" if p.name.startswith("tf-") else "vllm"]
        row = predict_run(db, ids[p.name], cal, slo) if cal is not None else None
        if row is None:
            continue
        rows[p.name] = row
        errors[p.name] = print_run(p.name, _title(p, capacity, db, ids[p.name]), row)
    held = {n: e for n, e in errors.items() if by_name[n].role == "held"}
    summary = _summary(held, by_name)
    noise = _noise(rows, errors, by_name)
    bands = {k: (c.band.to_dict() if c is not None and c.band else None) for k, c in cals.items()}
    planner = None
    if cals["vllm"] is not None and "p75" in by_name:
        from simulator_capacity import capacity_accuracy, poisson_spec

        planner = capacity_accuracy(db, ids, poisson_spec(runs, capacity), cals["vllm"])
    return {
        "capacity": capacity, "rows": rows, "errors": errors, "summary": summary, "noise": noise, "bands": bands,
        "planner_capacity": planner,
    }  # fmt: skip
