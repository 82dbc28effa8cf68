"""The result object of a run (CLI ``--json``, exports) and its text rendering."""

from __future__ import annotations

from typing import Any

from engine.measure import registry
from engine.measure.registry import GROUP_LABELS as LABELS
from engine.measure.registry import LATENCY_GROUPS, SCALARS, human_bytes

__all__ = ["human_bytes", "render_table", "result_object"]


def result_object(run: Any) -> dict[str, Any]:
    """One JSON-ready object per run, keys as in DESIGN.md (times in ms)."""
    metrics = run.metrics or {}
    obj: dict[str, Any] = {
        "run_id": run.id,
        "status": run.status,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "name": run.name,
        "model": run.model,
        "engine": run.engine,
        "device": run.device,
        "device_name": run.device_name,
        "fingerprint": run.fingerprint,
        "error": run.error,
        "spec": getattr(run, "spec", None),
        "provenance": getattr(run, "provenance", None),
    }
    for group in LATENCY_GROUPS:
        obj[group] = metrics.get(group)
    for key in SCALARS:
        obj[key] = metrics.get(key)
    for key in (
        "queue_ms",
        "goodput_fraction",
        "mean_tokens_per_chunk",
        "completed",
        "failed",
        "warmup_excluded",
        "total_output_tokens",
        "duration_s",
        "warmup_s",
        "quality_s",
        "peak_memory_kind",
    ):
        obj[key] = metrics.get(key)
    obj["error_rate"] = registry.error_rate(metrics) if metrics else None
    if metrics.get("load") is not None:  # serving runs: configured vs achieved rate, concurrency, SLOs
        obj["load"] = metrics["load"]
        obj["slo"] = metrics.get("slo")
    for key in ("trials", "trial_drift", "stopped_because", "noise_flags"):  # engine/run/trials.py, noise.py
        if metrics.get(key) is not None:
            obj[key] = metrics[key]
    obj["quality"] = run.quality
    return obj


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def render_table(obj: dict[str, Any]) -> str:
    """A plain-text table of one result object."""
    lines = [
        f"run {obj['run_id']}  status={obj['status']}  model={obj['model']}  engine={obj['engine']}  "
        f"device={obj['device']} ({obj.get('device_name') or '?'})"
    ]
    if obj.get("status") != "done":
        lines.append(f"error: {obj.get('error') or 'no reason recorded'}")
        return "\n".join(lines)
    if obj.get("error"):
        lines.append(f"note: {obj['error']}")
    header = f"{'metric':<34}{'mean':>10}{'p50':>10}{'p90':>10}{'p95':>10}{'p99':>10}"
    lines += [header, "-" * len(header)]
    for group in LATENCY_GROUPS:
        stats = obj.get(group) or {}
        label = f"{LABELS[group]} [ms]"
        lines.append(
            f"{label:<34}" + "".join(f"{_fmt(stats.get(k)):>10}" for k in ("mean", "p50", "p90", "p95", "p99"))
        )
    lines.append("")
    lines.append(f"{'output tokens/s':<34}{_fmt(obj.get('output_tokens_per_s'))}")
    lines.append(f"{'requests/s':<34}{_fmt(obj.get('requests_per_s'), 3)}")
    lines.append(f"{'tokens/s per user':<34}{_fmt(obj.get('tokens_per_s_per_user'))}")
    lines.append(f"{'weights memory (as loaded)':<34}{human_bytes(obj.get('weights_memory_bytes'))}")
    kind = f"  ({obj['peak_memory_kind']})" if obj.get("peak_memory_kind") else ""
    lines.append(f"{'peak memory':<34}{human_bytes(obj.get('peak_memory_bytes'))}{kind}")
    lines.append(f"{'load time [s]':<34}{_fmt(obj.get('load_s'))}")
    rate = obj.get("error_rate")
    lines.append(
        f"{'requests':<34}{obj.get('completed')} ok, {obj.get('failed')} failed"
        + (f" ({rate:.0%})" if rate else "")
        + f", {obj.get('warmup_excluded')} warm-up excluded"
    )
    load = obj.get("load")
    if load:
        lines.append(
            f"{'load':<34}arrival={load.get('arrival')}  configured rate={_fmt(load.get('configured_rate'))}/s  "
            f"achieved={_fmt(load.get('achieved_rate'))}/s  peak concurrency={load.get('peak_concurrency')}"
        )
        slo = obj.get("slo")
        goodput = (
            f"{_fmt(obj.get('goodput_requests_per_s'), 3)} req/s, {_fmt(obj.get('goodput_fraction'), 3)} met the SLO {slo}"
            if slo
            else "no SLO set (give --slo-ttft-ms / --slo-tpot-ms / --slo-e2el-ms to measure goodput)"
        )
        lines.append(f"{'goodput':<34}{goodput}")
    if obj.get("trials"):
        lines.append(
            f"{'trials':<34}{len(obj['trials'])}"
            + (f", stopped: {obj['stopped_because']}" if obj.get("stopped_because") else "")
        )
    lines += [f"{'noise: ' + f['flag']:<34}{f['detail']}" for f in obj.get("noise_flags") or []]
    lines.extend(_quality_lines(obj.get("quality")))
    return "\n".join(lines)


def _quality_lines(quality: dict[str, Any] | None) -> list[str]:
    """The accuracy metrics (the registry's, bookkeeping left out), each in its own unit, then notes."""
    if not quality:
        return []
    lines = ["", "accuracy (same engine, same recipe)"]
    hints = registry.task_kinds(quality)
    for key, value in registry.quality_metrics(quality).items():
        metric = registry.lookup(key, hints.get(key))
        err = registry.finite(quality.get(f"{key.removeprefix('quality.')}:stderr"))
        text = metric.format(value) + (f" ± {metric.format(err)}" if err is not None else "")
        lines.append(f"{metric.label[:33]:<34}{text}")
    notes = quality.get("notes")
    if isinstance(notes, dict):
        lines += [f"note: {k}: {v}" for k, v in notes.items()]
    return lines
