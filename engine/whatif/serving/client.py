"""The simulated client: when each request is sent, as :mod:`engine.run.driver` sends it.

Due times are the load driver's own (:func:`engine.run.driver.arrival_offsets_s`, same seed, over
the single requests and sessions' first turns), or the plan's (a trace). Then:

- open loop: each request is sent when due;
- ``max_concurrency`` (any arrival but ``batch``): at most that many requests (sessions) in
  flight; a freed slot goes to the earliest due request waiting for one;
- ``batch``: waves of ``batch_size`` requests, each sent when the one before has ended (of
  sessions: ``batch_size`` sessions at a time);
- sessions: a session holds its slot for all its turns; a later turn is sent when the one before
  has ended plus a think time (exponential with mean ``think_time_s``, seeded per session exactly
  as the driver seeds it).

The simulated client never lags: a request goes out at the moment it may.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from engine.run.driver import arrival_offsets_s
from engine.whatif.serving.requests import SimRequest

ARRIVALS = ("batch", "poisson", "gamma", "concurrency", "max", "trace")


@dataclass(frozen=True)
class Arrivals:
    """How the client sends: the workload's arrival fields (``kind`` ``trace``: the requests' own
    due times, which a plan with due times always uses)."""

    kind: str = "max"
    rate: float | None = None  # requests (or sessions) per second, for poisson and gamma
    burstiness: float = 1.0  # gamma shape
    seed: int = 0
    max_concurrency: int | None = None
    batch_size: int = 1  # batch: requests per wave
    think_time_s: float = 0.0  # sessions: mean think time between a reply and the next turn

    def __post_init__(self) -> None:
        if self.kind not in ARRIVALS:
            raise ValueError(f"arrival {self.kind!r} is not one of: {', '.join(ARRIVALS)}")
        if self.kind in ("poisson", "gamma") and not (self.rate and self.rate > 0):
            raise ValueError(f"arrival {self.kind} needs a rate above 0 (requests per second)")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {self.max_concurrency}")
        if self.batch_size < 1 or self.think_time_s < 0:
            raise ValueError("batch_size must be at least 1 and think_time_s at least 0")


class WorkloadLike(Protocol):
    """The workload fields the client reads (:class:`engine.spec.Workload` has them)."""

    arrival: str
    rate: float | None
    burstiness: float
    seed: int
    max_concurrency: int | None
    batch_size: int


def arrivals_of(workload: WorkloadLike, think_time_s: float = 0.0) -> Arrivals:
    """The client of a job's measured phase, from its workload (the load driver's own fields) and its plan's think
    time between a reply and a session's next turn (``RequestPlan.think_time_s``)."""
    return Arrivals(
        kind=workload.arrival,
        rate=workload.rate,
        burstiness=workload.burstiness,
        seed=workload.seed,
        max_concurrency=workload.max_concurrency,
        batch_size=workload.batch_size,
        think_time_s=think_time_s,
    )


def resolved_kind(requests: Sequence[SimRequest], arrivals: Arrivals) -> str:
    """``trace`` when any request has a due time of its own (as the load driver decides), else the kind."""
    return "trace" if any(r.due_s is not None for r in requests) else arrivals.kind


def due_times(requests: Sequence[SimRequest], arrivals: Arrivals) -> np.ndarray:
    """Each request's due time in seconds from the phase start; a later turn's is set when it is sent."""
    kind = resolved_kind(requests, arrivals)
    if kind == "trace":
        return np.asarray([r.due_s or 0.0 for r in requests], dtype=float)
    starts = [i for i, r in enumerate(requests) if not r.turn]
    offsets = np.zeros(len(requests))
    offsets[starts] = arrival_offsets_s(len(starts), kind, arrivals.rate, arrivals.burstiness, arrivals.seed)
    return offsets


Send = tuple[float, int]  # (send time s, request index)


def _units(requests: Sequence[SimRequest], due: np.ndarray) -> list[list[int]]:
    """Single requests and sessions (their turns in order), in the order they take slots."""
    sessions: dict[int, list[int]] = {}
    units: list[list[int]] = []
    for i, r in enumerate(requests):
        if r.session is None:
            units.append([i])
        elif r.session in sessions:
            sessions[r.session].append(i)
        else:
            sessions[r.session] = [i]
            units.append(sessions[r.session])
    for turns in sessions.values():
        turns.sort(key=lambda i: requests[i].turn or 0)
    return sorted(units, key=lambda u: (due[u[0]], u[0]))


class Client:
    """Sends: :meth:`start` gives the first sends, :meth:`ended` the sends a request's end frees."""

    def __init__(self, requests: Sequence[SimRequest], arrivals: Arrivals) -> None:
        self.requests = requests
        self.arrivals = arrivals
        self.due = due_times(requests, arrivals)
        self.units = _units(requests, self.due)
        has_sessions = any(r.session is not None for r in requests)
        kind = resolved_kind(requests, arrivals)
        self.waves = kind == "batch" and not has_sessions
        if kind == "batch":
            self.limit = None if self.waves else arrivals.batch_size
        else:
            self.limit = arrivals.max_concurrency
        self._place = {i: (u, k) for u, turns in enumerate(self.units) for k, i in enumerate(turns)}
        self._next = 0
        self._in_flight = 0
        self._wave_left = 0
        self._rngs: dict[int, np.random.Generator] = {}

    def start(self) -> list[Send]:
        """The requests sent from the phase start on (each at its due time)."""
        if self.waves:
            return self._wave(0.0)
        sends = []
        while self._next < len(self.units) and (self.limit is None or self._in_flight < self.limit):
            sends.append(self._take(0.0))
        return sends

    def _take(self, now: float) -> Send:
        first = self.units[self._next][0]
        self._next += 1
        self._in_flight += 1
        return max(float(self.due[first]), now), first

    def _wave(self, now: float) -> list[Send]:
        size = self.arrivals.batch_size
        wave = [u[0] for u in self.units[self._next : self._next + size]]
        self._next += len(wave)
        self._wave_left = len(wave)
        return [(max(float(self.due[i]), now), i) for i in wave]

    def _think(self, session: int) -> float:
        if self.arrivals.think_time_s <= 0:
            return 0.0
        if session not in self._rngs:
            self._rngs[session] = np.random.default_rng((self.arrivals.seed, session))
        return float(self._rngs[session].exponential(self.arrivals.think_time_s))

    def previous_turn(self, index: int) -> int | None:
        """The request of the same session's turn before, or None."""
        unit, k = self._place[index]
        return self.units[unit][k - 1] if k else None

    def next_turn(self, index: int) -> int | None:
        """The request of the same session's next turn, or None."""
        unit, k = self._place[index]
        turns = self.units[unit]
        return turns[k + 1] if k + 1 < len(turns) else None

    def ended(self, index: int, now: float) -> list[Send]:
        """Sends that request ``index`` ending at ``now`` (finished or cancelled) sets off."""
        unit, k = self._place[index]
        turns = self.units[unit]
        if k + 1 < len(turns):  # the session's next turn: after the user has thought
            session = self.requests[index].session or 0
            return [(now + self._think(session), turns[k + 1])]
        if self.waves:
            self._wave_left -= 1
            return self._wave(now) if self._wave_left == 0 and self._next < len(self.units) else []
        self._in_flight -= 1
        if self.limit is not None and self._next < len(self.units):
            return [self._take(now)]
        return []
