"""The result object of a run (CLI ``--json``, exports) and its text rendering.

How sure each figure is, in the result object: every latency group keeps DESIGN's keys
(``mean``, ``p50`` .. ``p99``, the raw numbers, even for a percentile the sample cannot
support) and adds ``n`` (samples), ``ci`` (``{"p50": [lo, hi] | None, ..., "mean": ...}``,
95 %) and ``supported`` (``{"p99": false, ...}``: false means "n too small", so a reader
must not quote that number). Throughput intervals sit under ``ci`` at the top level
(``{"output_tokens_per_s": [lo, hi] | None, ...}``). The text table prints
"n too small" instead of an unsupported percentile and each interval under its figure.

A predicted run (the serving simulator's, ``storage.runs`` ``predicted``) has the same keys, with
``"predicted": true``, its leave-one-out error ``band`` (None: uncalibrated, no band claimed) and its
``prediction`` (hardware, tensor parallelism, calibration label); a measured run has ``"predicted": false``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject, JSONValue
from engine.measure import registry
from engine.measure.metric import RESULT
from engine.measure.registry import GROUP_LABELS as LABELS
from engine.measure.registry import LATENCY_GROUPS, N_TOO_SMALL, STATS, human_bytes
from engine.report.headline import schedule_line, ttft_headline
from engine.report.values import GROUPS_WITH_CI, sample_count, supported, with_intervals

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord
    from storage.runs import RunSummary

__all__ = ["FLAG_WORDS", "human_bytes", "noise_words", "render_table", "result_object"]

# A noise flag in words (engine/run/noise.py writes the flags): the Run page's badges, Compare, the report.
FLAG_WORDS = {
    "contention": "measured under contention",
    "steal": "CPU time stolen",
    "gpu_busy": "GPU shared",
    "few_requests": "too few requests",
    "short": "too short",
    "warmup": "warm-up too short",
    "drift": "repeats drift",
    "client_bound": "client-bound (the client set the pace)",
}


def noise_words(metrics: JSONMapping | None) -> list[tuple[str, str]]:
    """(words, kind) per noise flag of a run: ``("measured under contention: load 3.7 on 2 cores", "machine")``."""
    flags = (metrics or {}).get("noise_flags") or []
    return [
        (f"{FLAG_WORDS.get(f.get('flag'), f.get('flag'))}: {f.get('detail', '')}", str(f.get("kind") or ""))
        for f in flags
        if isinstance(f, dict)
    ]


def _group(metrics: JSONObject, group: str) -> JSONValue:
    stats = metrics.get(group)
    if not isinstance(stats, dict):
        return stats
    out = dict(stats)
    out["n"] = sample_count(metrics, group)
    out.setdefault("ci", None)
    out["supported"] = {k: supported(metrics, group, k) for k in STATS}
    return out


def load_shared_words(obj: JSONMapping) -> str | None:
    """Where the run's model was loaded for several runs (a sweep's points, the engine allowing it): which run on
    that load it was, in words; None for a run that loaded its own."""
    prov = obj.get("provenance")
    shared = prov.get("load_shared") if isinstance(prov, dict) else None
    if not isinstance(shared, dict) or not isinstance(shared.get("run_on_load"), int):
        return None
    n = shared["run_on_load"]
    if n == 1:
        return "loaded here and kept for the sweep's next points"
    return f"loaded once for the sweep: this is run {n} on that load, which did not load again"


def result_object(run: RunSummary, requests: Sequence[RequestRecord] | None = None) -> JSONObject:
    """One JSON-ready object per run, keys as in DESIGN.md (times in ms), with intervals (module doc).

    ``requests`` (the run's raw stamps) lets a run stored before intervals get them computed.
    """
    metrics = with_intervals(run.metrics, requests) or {}
    obj: JSONObject = {
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
    for group in GROUPS_WITH_CI:
        obj[group] = _group(metrics, group)
    shown = registry.shown_in("result")
    for metric in (m for m in shown if m.group is None and m.is_metric):  # the figures, in display order
        obj[metric.key] = metric.value(metrics) if metric.read is not None else metrics.get(metric.key)
    obj["ci"] = metrics.get("ci")
    for metric in (m for m in shown if not m.is_metric):  # their counts and companions
        obj[metric.key] = metrics.get(metric.key)
    if metrics.get("load") is not None:  # serving runs: configured vs achieved rate, concurrency, SLOs
        obj["load"] = metrics["load"]
        obj["slo"] = metrics.get("slo")
    if metrics.get("client") is not None:  # serving runs: the client's own lag and CPU (engine.measure.client_lag)
        obj["client"] = metrics["client"]
    if metrics.get("schedule") is not None:  # requests with due times: was the schedule kept? (engine.measure.schedule)
        obj["schedule"] = metrics["schedule"]
    for key in ("trials", "trial_drift", "stopped_because", "noise_flags"):  # engine/run/repeats.py, noise.py
        if metrics.get(key) is not None:
            obj[key] = metrics[key]
    obj["quality"] = run.quality
    if getattr(run, "predicted", False):  # the serving simulator's: its hardware, calibration and band
        prediction = (getattr(run, "provenance", None) or {}).get("prediction") or {}
        obj["predicted"] = True
        obj["band"] = prediction.get("band")
        obj["prediction"] = prediction
    else:
        obj["predicted"] = False
    return obj


def _fmt(value: object, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def render_table(obj: JSONMapping) -> str:
    """A plain-text table of one result object."""
    lines = [
        f"{'PREDICTED run' if obj.get('predicted') else 'run'} {obj['run_id']}  status={obj['status']}  "
        f"model={obj['model']}  engine={obj['engine']}  device={obj['device']} ({obj.get('device_name') or '?'})"
    ]
    if obj.get("predicted"):
        lines.append(f"predicted, not measured: {(obj.get('prediction') or {}).get('label') or 'no label'}")
    if obj.get("status") != "done":
        lines.append(f"error: {obj.get('error') or 'no reason recorded'}")
        return "\n".join(lines)
    if obj.get("error"):
        lines.append(f"note: {obj['error']}")
    lines += _latency_lines(obj)
    lines += _schedule_lines(obj)
    lines += _scalar_lines(obj)
    lines.append(f"{'weights memory (as loaded)':<34}{human_bytes(obj.get('weights_memory_bytes'))}")
    kind = f"  ({obj['peak_memory_kind']})" if obj.get("peak_memory_kind") else ""
    lines.append(f"{'peak memory':<34}{human_bytes(obj.get('peak_memory_bytes'))}{kind}")
    shared = load_shared_words(obj)
    lines.append(f"{'load time [s]':<34}{_fmt(obj.get('load_s'))}" + (f"  ({shared})" if shared else ""))
    lines.append(f"{'energy per output token':<34}{energy_words(obj)}")
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
    note = (obj.get("provenance") or {}).get("context_note")  # a server whose context the run did not know
    if note:
        lines.append(f"{'context':<34}{note}")
    lines.extend(_accuracy_lines(obj.get("quality")))
    return "\n".join(lines)


def energy_words(obj: JSONMapping) -> str:
    """``0.42 J/token, 61.3 W (nvml: ...)``, or ``unavailable: <reason>`` (never 0)."""
    per_token = obj.get("energy_per_output_token_j")
    if per_token is None:
        return f"unavailable: {obj.get('energy_unavailable') or 'not measured (run stored before energy existed)'}"
    power = obj.get("avg_power_w")
    watts = "" if power is None else f", {registry.lookup('avg_power_w').format(power)}"
    return f"{registry.lookup('energy_per_output_token_j').format(per_token)}{watts} ({obj.get('energy_source')})"


COL = 14


def _cell(stats: JSONMapping, key: str) -> str:
    if not (stats.get("supported") or {}).get(key, True):
        return N_TOO_SMALL
    return _fmt(stats.get(key))


def _short(value: float, digits: int) -> str:
    """Four or five significant figures: ``9.84``, ``118.1``, ``1,234``."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.{digits}f}"


def _span(ci: object, digits: int = 2) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or None in ci:
        return ""
    return f"{_short(ci[0], digits)}–{_short(ci[1], digits)}"


def _schedule_lines(obj: JSONMapping) -> list[str]:
    """Requests with due times: the schedule in words and, when it was not kept, the headline from the due time."""
    schedule = obj.get("schedule")
    line = schedule_line(schedule)
    if line is None:
        return []
    head = ttft_headline(obj, schedule, obj.get("engine"))
    lines = [f"{'schedule':<34}{line}"]
    if head is not None:
        lines.append(f"{'headline':<34}{head.label} {head.value} ({head.under})")
    return lines + [""]


def _latency_lines(obj: JSONMapping) -> list[str]:
    """Each latency group's statistics, "n too small" where unsupported, and a 95 % CI line under it (latency
    from the due time too when the schedule was not kept)."""
    header = f"{'metric':<34}" + "".join(f"{k:>{COL}}" for k in STATS) + f"{'n':>7}"
    lines = [header, "-" * len(header)]
    late = obj.get("schedule") and not obj["schedule"].get("kept")
    due_groups = tuple(g for g in ("ttft_from_due_ms", "e2el_from_due_ms") if late and obj.get(g))
    for group in LATENCY_GROUPS + due_groups:
        stats = obj.get(group) or {}
        n = stats.get("n")
        lines.append(
            f"{LABELS[group] + ' [ms]':<34}"
            + "".join(f"{_cell(stats, k):>{COL}}" for k in STATS)
            + f"{'-' if n is None else n:>7}"
        )
        ci = stats.get("ci") or {}
        spans = [_span(ci.get(k)) if _cell(stats, k) != N_TOO_SMALL else "" for k in STATS]
        if any(spans):
            lines.append((f"{'  95 % CI':<34}" + "".join(f"{s:>{COL}}" for s in spans)).rstrip())
    lines.append("")
    return lines


# Figures with words of their own below (memory with what it measured, energy with its source, goodput with its
# SLO, failures with the request counts); every other scalar the registry puts in the result is a line of its own.
_OWN_WORDS = frozenset(
    {
        "weights_memory_bytes",
        "peak_memory_bytes",
        "load_s",
        "energy_per_output_token_j",
        "avg_power_w",
        "goodput_requests_per_s",
        "goodput_fraction",
        "error_rate",
    }
)


def _scalar_lines(obj: JSONMapping) -> list[str]:
    """A line per scalar figure of the result the registry declares (throughput first, in display order), with
    its 95 % interval: a figure declared later is shown without an edit here."""
    out = []
    for m in registry.shown_in(RESULT):
        if m.group is not None or not m.is_metric or m.key in _OWN_WORDS or m.key.startswith("quality."):
            continue
        if obj.get(m.key) is None and m.key != "output_tokens_per_s":
            continue  # not reported by this run (per GPU on the CPU)
        out.append(f"{m.label + '  ':<34}{_with_ci(obj, m.key)}")
    return out


def _with_ci(obj: JSONMapping, key: str) -> str:
    value = obj.get(key)
    digits = 3 if key == "requests_per_s" else 2
    span = _span((obj.get("ci") or {}).get(key), digits)
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" + (f"  (95 % CI {span})" if span else "  (no interval)")


def _accuracy_lines(quality: JSONMapping | None) -> list[str]:
    """The accuracy metrics (the registry's, bookkeeping left out), each in its own unit, then notes."""
    if not quality:
        return []
    lines = ["", "accuracy (same engine, same recipe)"]
    hints = registry.task_kinds(quality)
    for key, value in registry.accuracy_metrics(quality).items():
        metric = registry.lookup(key, hints.get(key))
        err = registry.finite(quality.get(f"{key.removeprefix('quality.')}:stderr"))
        text = metric.format(value) + (f" ± {metric.format(err)}" if err is not None else "")
        lines.append(f"{metric.label[:33]:<34}{text}")
    notes = quality.get("notes")
    if isinstance(notes, dict):
        lines += [f"note: {k}: {v}" for k, v in notes.items()]
    return lines
