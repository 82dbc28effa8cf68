"""The result object of a run (CLI ``--json``, exports) and its text rendering."""

from __future__ import annotations

from typing import Any

from engine.measure.registry import GROUP_LABELS as LABELS
from engine.measure.registry import LATENCY_GROUPS, SCALARS


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
    if metrics.get("load") is not None:  # serving runs: configured vs achieved rate, concurrency, SLOs
        obj["load"] = metrics["load"]
        obj["slo"] = metrics.get("slo")
    obj["quality"] = run.quality
    return obj


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"


def render_table(obj: dict[str, Any]) -> str:
    """A plain-text table of one result object."""
    lines = [
        f"run {obj['run_id']}  status={obj['status']}  model={obj['model']}  engine={obj['engine']}  "
        f"device={obj['device']} ({obj.get('device_name') or '?'})"
    ]
    if obj.get("error"):
        lines.append(f"error: {obj['error']}")
        return "\n".join(lines)
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
    lines.append(
        f"{'requests':<34}{obj.get('completed')} ok, {obj.get('failed')} failed, "
        f"{obj.get('warmup_excluded')} warm-up excluded"
    )
    load = obj.get("load")
    if load:
        lines.append(
            f"{'load':<34}arrival={load.get('arrival')}  configured rate={_fmt(load.get('configured_rate'))}/s  "
            f"achieved={_fmt(load.get('achieved_rate'))}/s  peak concurrency={load.get('peak_concurrency')}"
        )
        slo = obj.get("slo")
        lines.append(
            f"{'goodput':<34}{_fmt(obj.get('goodput_requests_per_s'), 3)} req/s, "
            + (
                f"{_fmt(obj.get('goodput_fraction'), 3)} met the SLO {slo}"
                if slo
                else "no SLO set: every completed request counts"
            )
        )
    lines.extend(_quality_lines(obj.get("quality")))
    return "\n".join(lines)


QUALITY_LABELS: tuple[tuple[str, str, str], ...] = (
    ("perplexity", "perplexity", "{:.3f}"),
    ("kl_mean", "KL mean (vs reference recipe)", "{:.5f}"),
    ("kl_p99", "KL p99", "{:.5f}"),
    ("top1_agreement", "top-1 agreement", "{:.1%}"),
    ("greedy_flip_rate", "greedy tokens flipped", "{:.1%}"),
)


def _quality_lines(quality: dict[str, Any] | None) -> list[str]:
    if not quality:
        return []
    lines = ["", "accuracy (same engine, same recipe)"]
    for key, label, fmt in QUALITY_LABELS:
        if isinstance(quality.get(key), (int, float)):
            lines.append(f"{label:<34}{fmt.format(quality[key])}")
    for key, value in quality.items():
        if key.startswith("task:") and not key.endswith(":stderr") and isinstance(value, (int, float)):
            err = quality.get(f"{key}:stderr")
            lines.append(f"{key[:33]:<34}{value:.3f}" + (f" ± {err:.3f}" if isinstance(err, (int, float)) else ""))
    notes = quality.get("notes")
    if isinstance(notes, dict):
        lines += [f"note: {k}: {v}" for k, v in notes.items()]
    return lines
