"""The traffic a capacity plan serves (pure): its peak and mean rate, its tokens, and the sample each probe sends.

A traffic is a job's request plan (any source). Its **rate** is counted in arrivals: requests, or
sessions for a source of multi-turn sessions (their first turns arrive; later turns follow the replies).

- **A source with a schedule** (a trace): its peak rate is the most arrivals due in any window of
  ``window_s`` seconds (sliding over its own due times), over the window; its mean rate is arrivals over
  the span they are due in. Each probe sends the ``sample`` consecutive requests with the shortest span
  (the traffic's busiest stretch) on their own schedule, sped up or slowed down to the probed rate.
- **A source without one**: its peak and mean rate are the configured rate (``--rate``); each probe sends
  the first ``sample`` requests (whole sessions) as the workload's arrival process (Poisson, or gamma with
  its burstiness) at the probed rate, with the workload's concurrency limit.

Output tokens per arrival are the whole plan's (a session's turns together), so cost per token counts
what the traffic asks for.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from engine.jsonvalue import JSONObject
from engine.run.plan import PlannedRequest, RequestPlan
from engine.whatif.serving import Arrivals, SimRequest, requests_from_plan

DEFAULT_SAMPLE = 1000
DEFAULT_WINDOW_S = 60.0


class TrafficError(ValueError):
    """A traffic the planner cannot size: the message is one line saying what to give."""


def _units(measured: list[PlannedRequest]) -> list[list[int]]:
    """Arrivals in plan order: single requests, and sessions (all their turns)."""
    sessions: dict[int, list[int]] = {}
    units: list[list[int]] = []
    for i, p in enumerate(measured):
        if p.session is None:
            units.append([i])
        elif p.session in sessions:
            sessions[p.session].append(i)
        else:
            sessions[p.session] = [i]
            units.append(sessions[p.session])
    return units


def peak_rate(due_s: np.ndarray, window_s: float) -> float:
    """The most due times in any window of ``window_s`` seconds starting at one of them, per second (the whole
    span when it is shorter than the window)."""
    t = np.sort(np.asarray(due_s, dtype=float))
    span = float(t[-1] - t[0]) if t.size else 0.0
    if t.size < 2 or span <= 0:
        raise TrafficError("the traffic's requests are all due at once: it has no rate to plan for")
    if window_s >= span:
        return t.size / span
    counts = np.searchsorted(t, t + window_s, side="left") - np.arange(t.size)
    return float(counts.max()) / window_s


def busiest(due_s: np.ndarray, n: int) -> np.ndarray:
    """Indices (in due order) of the ``n`` consecutive requests with the shortest span."""
    order = np.argsort(due_s, kind="stable")
    if n >= order.size:
        return order
    t = np.asarray(due_s, dtype=float)[order]
    spans = t[n - 1 :] - t[: t.size - n + 1]
    first = int(np.argmin(spans))
    return order[first : first + n]


@dataclass(eq=False)
class Traffic:
    """What a plan serves, sized (module doc); :meth:`at` gives a probe's requests and client."""

    plan: RequestPlan
    arrival: str  # poisson | gamma | trace
    peak_rate: float
    mean_rate: float
    tokens_per_arrival: float
    window_s: float
    sample: list[int]  # indices into plan.measured, in plan order
    sample_rate: float | None = None  # a trace's sample: its own arrivals per second
    burstiness: float = 1.0
    seed: int = 0
    max_concurrency: int | None = None
    sessions: bool = False
    _cache: dict[int, list[SimRequest]] = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return "sessions/s" if self.sessions else "req/s"

    def requests(self, block_size: int) -> list[SimRequest]:
        """The sample as the simulator's requests (prompt blocks hashed for ``block_size``), made once."""
        if block_size not in self._cache:
            sub = replace(self.plan, warmup=[], measured=[self.plan.measured[i] for i in self.sample])
            self._cache[block_size] = requests_from_plan(sub, block_size)
        return self._cache[block_size]

    def at(self, rate: float, block_size: int) -> tuple[list[SimRequest], Arrivals]:
        """The sample sent at ``rate`` arrivals per second (a trace's schedule scaled to it)."""
        requests = self.requests(block_size)
        if self.arrival != "trace":
            kind = "gamma" if self.arrival == "gamma" else "poisson"
            client = Arrivals(kind, rate, self.burstiness, self.seed, self.max_concurrency)
            return requests, client
        first = min(r.due_s or 0.0 for r in requests)
        speed = rate / (self.sample_rate or rate)
        moved = [replace(r, due_s=((r.due_s or 0.0) - first) / speed) for r in requests]
        return moved, Arrivals("trace", seed=self.seed, max_concurrency=self.max_concurrency)

    def to_dict(self) -> JSONObject:
        return {
            "arrival": self.arrival,
            "unit": self.unit,
            "peak_rate": self.peak_rate,
            "mean_rate": self.mean_rate,
            "window_s": self.window_s,
            "tokens_per_arrival": self.tokens_per_arrival,
            "planned_requests": len(self.plan.measured),
            "sample_requests": len(self.sample),
            "sample_rate": self.sample_rate,
        }


def _sample_units(units: list[list[int]], n: int) -> list[int]:
    picked: list[int] = []
    for unit in units:
        if len(picked) >= n:
            break
        picked.extend(unit)
    return sorted(picked)


def traffic_of(
    plan: RequestPlan,
    arrival: str,
    rate: float | None,
    *,
    burstiness: float = 1.0,
    seed: int = 0,
    max_concurrency: int | None = None,
    sample: int = DEFAULT_SAMPLE,
    window_s: float = DEFAULT_WINDOW_S,
) -> Traffic:
    """The plan sized for capacity (module doc); :class:`TrafficError` in one line when it cannot be."""
    measured = plan.measured
    units = _units(measured)
    if len(units) < 2:
        raise TrafficError(f"the traffic has {len(units)} request(s): a capacity plan needs at least 2 (--requests)")
    tokens = sum(p.output_tokens for p in measured) / len(units)
    common = {"burstiness": burstiness, "seed": seed, "max_concurrency": max_concurrency}
    sessions = any(p.session is not None for p in measured)
    if plan.scheduled:
        due = np.asarray([p.due_s or 0.0 for p in measured], dtype=float)
        span = float(due.max() - due.min())
        peak = peak_rate(due, window_s)
        picked = np.sort(busiest(due, sample))
        sub = due[picked]
        sub_span = float(sub.max() - sub.min())
        sample_rate = len(picked) / sub_span if sub_span > 0 else peak
        return Traffic(plan, "trace", peak, len(units) / span, tokens, window_s, picked.tolist(), sample_rate, **common)
    if arrival not in ("poisson", "gamma") or rate is None:
        raise TrafficError(
            "give the traffic's rate: --rate R (its peak in requests per second; Poisson arrivals, or --arrival "
            "gamma --burstiness B), or a trace with its own schedule"
        )
    picked_units = _sample_units(units, sample)
    return Traffic(plan, arrival, rate, rate, tokens, window_s, picked_units, None, sessions=sessions, **common)
