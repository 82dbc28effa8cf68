"""A run's headline latency: from the due time when the schedule was not kept, from the send otherwise (pure).

A trace or an arrival process gives each request a due time. When the run kept that schedule
(:mod:`engine.measure.schedule`: the rule in words is :data:`~engine.measure.schedule.RULE`), latency from
the send is the server's latency. When it did not (an engine serving one request at a time falls minutes
behind a trace), the latency a user would feel is from the due time, so the Run page's cards and the
result's text put TTFT from the due time first, with TTFT from the send beside it.

The schedule is the run's stored ``metrics["schedule"]``; runs stored before it get it from their
aggregates (the due and send columns), by the same function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.schedule import RULE, duration_text, kept_words, lateness_words, schedule_of, span_text
from engine.spec import engines
from engine.spec.sources.flat import stored_traffic
from engine.spec.workload import flat_workload

if TYPE_CHECKING:
    from engine.measure.aggregates import Aggregates
    from engine.report.runlike import RunLike

DUE_ARRIVALS = ("poisson", "gamma")


def has_due_times(spec: JSONMapping | None) -> bool:
    """Whether a run's requests had due times of their own: a trace, or an open arrival process."""
    raw = (spec or {}).get("workload")
    workload = flat_workload(raw if isinstance(raw, Mapping) else None)
    traffic = stored_traffic(workload)
    return bool(traffic and traffic.scheduled) or workload.get("arrival") in DUE_ARRIVALS


def run_schedule(run: RunLike, agg: Aggregates | None = None) -> JSONObject | None:
    """The run's schedule group: stored with it, else from its aggregates (``agg``) when it had due times."""
    stored = (getattr(run, "metrics", None) or {}).get("schedule")
    if isinstance(stored, dict):
        return stored
    if agg is None or not len(agg) or not has_due_times(getattr(run, "spec", None)):
        return None
    c, m, t0 = agg.columns, agg.mask(), int(agg.t0_ns)
    return schedule_of(c["arrival"][m] + t0, c["send"][m] + t0)  # the stamps back on their clock (unsent: 0)


def serves_one_at_a_time(engine: str | None) -> bool:
    """Whether an engine serves one request at a time (its descriptor declares no ``serving`` capability)."""
    found = engines.find(engine)
    return found is not None and not found.capabilities.serving


@dataclass(frozen=True)
class Headline:
    """The TTFT card: its label, value and the line under it; ``note`` says why it is from the due time."""

    label: str
    value: str
    under: str | None
    note: str | None = None


def _p50(obj: JSONMapping, group: str) -> tuple[float | None, list[float] | None]:
    stats = obj.get(group) or {}
    return stats.get("p50"), (stats.get("ci") or {}).get("p50")


def ttft_headline(obj: JSONMapping, schedule: JSONMapping | None, engine: str | None) -> Headline | None:
    """The TTFT card from the due time when the schedule was not kept; None when the usual card stands."""
    if not schedule or schedule.get("kept"):
        return None
    due, due_ci = _p50(obj, "ttft_from_due_ms")
    if due is None:
        return None
    sent, _ = _p50(obj, "ttft_ms")
    span = span_text(*(due_ci or (None, None)))
    under = f"from the send: {duration_text(sent)}" + (f" · 95 % CI {span}" if span else "")
    return Headline("TTFT p50 from the due time", duration_text(due), under, schedule_note(schedule, engine))


def schedule_note(schedule: JSONMapping, engine: str | None) -> str:
    """Why the headline is from the due time, in words: the schedule, the rule and (where it applies) the engine."""
    why = (
        f" The {engine} engine serves one request at a time, so each request waited for the ones before it."
        if serves_one_at_a_time(engine)
        else ""
    )
    return (
        f"The schedule was {kept_words(schedule)}.{why} Latency from the due time is what users would have felt, "
        f"so it leads; latency from the send is the server's own. Rule: {RULE}."
    )


def schedule_line(schedule: JSONMapping | None) -> str | None:
    """One line for the result's text: ``schedule: not kept (...); send minus due: p50 ...``."""
    if not schedule:
        return None
    late = lateness_words(schedule.get("send_minus_due_ms") or {}, "send minus due")
    return f"schedule {kept_words(schedule)}; {late}"
