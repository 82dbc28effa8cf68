"""What every diagnostic shares: the :class:`Finding` shape and readers of a stored series (pure).

A series is the ``{"t_s": [...], "fields": {name: [...]}, "t0_ns": ...}`` record of a run
(``"telemetry"`` from :mod:`engine.measure.telemetry`, ``"server_metrics"`` from the serving
probes). ``t_s`` counts seconds from ``t0_ns`` (``perf_counter_ns`` in the measuring process,
the clock of the requests' stamps); a series without ``t0_ns`` is taken to start with the
telemetry (both start as the measured phase starts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from engine.jsonvalue import JSONMapping, JSONObject

Severity = Literal["critical", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
NS = 1_000_000_000


@dataclass(frozen=True)
class Finding:
    """One thing a run's evidence shows: what, how bad, the evidence itself, and what to do.

    ``evidence`` holds ``details`` (lines of text), ``windows`` (``[t0_s, t1_s]`` from the
    measured phase's start), ``samples`` (telemetry rows ``{"t_s": ..., field: value}``) and
    ``requests`` (request indices or per-request rows), each only where it applies.
    """

    kind: str  # "throttling" | "memory_growth" | "p99_spikes" | "contention"
    severity: Severity
    title: str
    evidence: JSONObject = field(default_factory=dict)
    suggestion: str = ""

    def to_dict(self) -> JSONObject:
        return asdict(self)


def values(series: JSONMapping | None, name: str) -> list[float | None]:
    """A field's values ([] when the series or the field is absent)."""
    if not series:
        return []
    got = (series.get("fields") or {}).get(name)
    return list(got) if isinstance(got, list) else []


def times(series: JSONMapping | None) -> list[float]:
    return [float(t) for t in (series or {}).get("t_s") or []]


def present(series: JSONMapping | None, name: str) -> list[tuple[int, float]]:
    """(sample index, value) of a field's answered samples."""
    return [(i, float(v)) for i, v in enumerate(values(series, name)) if v is not None]


def offset_s(series: JSONMapping | None, t0_ns: int | None) -> float:
    """Seconds to add to a series' ``t_s`` to put it on the timeline that starts at ``t0_ns``."""
    own = (series or {}).get("t0_ns")
    if own is None or t0_ns is None:
        return 0.0
    return (int(own) - int(t0_ns)) / NS


def windows(t_s: Sequence[float], hits: Sequence[bool], gap: int = 2) -> list[list[float]]:
    """Time windows ``[start_s, end_s]`` of consecutive hit samples (gaps of up to ``gap`` misses joined)."""
    out: list[list[float]] = []
    last_hit = -(gap + 2)
    for i, hit in enumerate(hits):
        if not hit:
            continue
        if out and i - last_hit <= gap + 1:
            out[-1][1] = round(t_s[i], 3)
        else:
            out.append([round(t_s[i], 3), round(t_s[i], 3)])
        last_hit = i
    return out


def in_window(t_s: Sequence[float], start: float, end: float, pad: float = 0.0) -> list[int]:
    """Indices of samples between ``start - pad`` and ``end + pad`` seconds."""
    return [i for i, t in enumerate(t_s) if start - pad <= t <= end + pad]


def sample_rows(series: JSONMapping, indices: Sequence[int], names: Sequence[str]) -> list[JSONObject]:
    """Telemetry rows for evidence: ``{"t_s": ..., name: value}`` for each index."""
    t_s = times(series)
    cols = {n: values(series, n) for n in names}
    return [{"t_s": t_s[i], **{n: col[i] for n, col in cols.items() if i < len(col)}} for i in indices]


def worst(indices: Sequence[int], key: Callable[[int], float], n: int = 5) -> list[int]:
    """The ``n`` indices with the largest ``key``, in time order."""
    return sorted(sorted(indices, key=key, reverse=True)[:n])


def span_words(wins: Sequence[Sequence[float]], limit: int = 4) -> str:
    """``"12.3–15.0 s, 40.1–41.0 s"`` (and ``+N more``)."""
    parts = [f"{a:.1f}–{b:.1f} s" if b > a else f"{a:.1f} s" for a, b in wins[:limit]]
    more = len(wins) - limit
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then by kind."""
    return sorted(findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), f.kind))
