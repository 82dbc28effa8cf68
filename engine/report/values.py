"""A run's figures as flat metric keys (the registry's keys), with the hints the registry needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure import registry
from engine.measure.registry import ALL_GROUPS, finite
from engine.measure.stats import min_samples

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord
    from engine.report.runlike import Measured


def flat_metrics(run: Measured) -> dict[str, float | None]:
    """A run's metrics as flat keys: every declared metric (``ttft_ms_p50``, ``output_tokens_per_s``,
    ``error_rate`` ...; accuracy ones when measured) and its task scores, each read as its declaration says.

    Accuracy bookkeeping (window, stride, counts, stderr companions) is left out.
    """
    return registry.figures(getattr(run, "metrics", None), getattr(run, "quality", None))


def run_hints(run: Measured | None) -> dict[str, str]:
    """The registry hints of a run: ``{"quality.task:NAME": kind}``."""
    return registry.task_kinds(getattr(run, "quality", None))


def ratio(value: float | None, base: float | None) -> float | None:
    """``value / base``, or None when either is missing or the base is zero."""
    if value is None or base is None or base == 0:
        return None
    return value / base


# -- how sure each figure is: stored intervals, or ones computed from the raw requests -------------
GROUPS_WITH_CI: tuple[str, ...] = ALL_GROUPS
_N_FROM_COMPLETED = ("ttft_ms", "e2el_ms", "tpot_ms")  # one sample per completed request (TPOT: at most)


def with_intervals(metrics: JSONObject | None, requests: Sequence[RequestRecord] | None) -> JSONObject | None:
    """``metrics`` with ``n`` and ``ci`` filled in from the raw requests when it was stored without them.

    A run stored before intervals existed has no ``ci``; with its requests at hand they are
    computed on the fly (cheap: order statistics and one small bootstrap). Without requests
    the metrics are returned unchanged (no intervals are shown).
    """
    if not metrics or "ci" in metrics or not requests:
        return metrics
    from engine.measure.metrics import interval_fields

    fields = interval_fields(requests, float(metrics.get("duration_s") or 0.0))
    out = dict(metrics)
    for group in GROUPS_WITH_CI:
        if isinstance(out.get(group), dict) and group in fields:
            out[group] = {**out[group], **fields[group]}
    out["ci"] = fields["ci"]
    return out


def sample_count(metrics: JSONMapping | None, group: str) -> int | None:
    """A group's sample count: its stored ``n``, else (older runs) the completed requests for TTFT/E2EL/TPOT."""
    metrics = metrics or {}
    n = finite((metrics.get(group) or {}).get("n"))
    if n is None and group in _N_FROM_COMPLETED:
        n = finite(metrics.get("completed"))
    return None if n is None else int(n)


def supported(metrics: JSONMapping | None, group: str, stat: str) -> bool:
    """Whether the sample supports a group's statistic (False: show "n too small"); True when unknown."""
    n = sample_count(metrics, group)
    if n is None:
        return True
    if stat == "mean":
        return n >= 1
    return n >= min_samples(float(stat.removeprefix("p")))


def interval(metrics: JSONMapping | None, key: str) -> list[float] | None:
    """The stored ``[lo, hi]`` of a flat key (``tpot_ms_p50``, ``output_tokens_per_s``), or None."""
    metrics = metrics or {}
    metric = registry.lookup(key)
    if metric.group is not None:
        return ((metrics.get(metric.group) or {}).get("ci") or {}).get(metric.stat)
    return (metrics.get("ci") or {}).get(key)


def flat_supported(metrics: JSONMapping | None, key: str) -> bool:
    """:func:`supported` for a flat key (scalars are always supported)."""
    metric = registry.lookup(key)
    return True if metric.group is None else supported(metrics, metric.group, str(metric.stat))


Z95 = 1.959963984540054


# -- a run's 95 % band of one figure: its stored interval, or ± 1.96 standard errors for accuracy ---
def _pair(value: object) -> tuple[float, float] | None:
    if isinstance(value, Mapping):
        value = (value.get("lo"), value.get("hi"))
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    lo, hi = registry.finite(value[0]), registry.finite(value[1])
    return None if lo is None or hi is None else (min(lo, hi), max(lo, hi))


def stored_interval(metrics: JSONMapping | None, key: str) -> tuple[float, float] | None:
    """A run's stored 95 % interval of a flat metric key; None when none was stored ("n too small", older runs)."""
    metrics = metrics or {}
    metric = registry.lookup(key)
    if metric.group is not None:
        stats = metrics.get(metric.group)
        ci = stats.get("ci") if isinstance(stats, Mapping) else None
        return _pair(ci.get(metric.stat)) if isinstance(ci, Mapping) else None
    ci = metrics.get("ci")
    if isinstance(ci, Mapping) and key in ci:
        return _pair(ci[key])
    return _pair(metrics.get(f"{key}_ci"))


def accuracy_stderr(quality: JSONMapping | None, key: str) -> float | None:
    """The standard error stored beside an accuracy figure (``perplexity_stderr``, ``task:X:stderr``)."""
    name = key.removeprefix("quality.")
    names = [f"{name}:stderr", f"{name}_stderr"] + (["kl_stderr"] if name == "kl_mean" else [])
    for candidate in names:
        value = registry.finite((quality or {}).get(candidate))
        if value is not None:
            return value
    return None


def band_of(run: Measured, key: str, value: float | None) -> tuple[float, float] | None:
    """The 95 % band of one run's figure: its stored interval, or value ± 1.96 stderr for accuracy."""
    if value is None:
        return None
    if key.startswith("quality."):
        se = accuracy_stderr(getattr(run, "quality", None), key)
        return None if se is None else (value - Z95 * se, value + Z95 * se)
    return stored_interval(getattr(run, "metrics", None), key)
