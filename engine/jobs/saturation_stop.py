"""Sweeps that stop at saturation: a point's verdict, and the higher loads it leaves unrun.

A rate or concurrency sweep that stops at saturation runs its points in increasing order of
load and stops after the first point whose run is saturated (:mod:`engine.measure.saturation`:
every serving run stores its verdict as its ``saturation`` side record). A closed-loop point
whose server gave no queue figures is judged against the sweep's previous concurrency
(:func:`engine.measure.saturation.against_previous`). Two places run a sweep's points:

* ``python -m engine sweep --stop-at-saturation`` runs them one after another
  (:mod:`engine.cli.sweep`) and asks :func:`point_verdict` after each;
* the Launch page's load sweep queues them all at once, each carrying the note
  :data:`storage.jobs.STOPS_AT_SATURATION`; the job process of every point calls
  :func:`after_job_run`: when its run is saturated, the queued points of its group
  (:func:`engine.spec.sweep.load_group`: the same spec but for the load) at higher loads that
  carry the note end as cancelled with the reason ``not run: saturated at 8 req/s (run 12): ...``,
  which the Jobs page shows. A point already running elsewhere (a second worker) finishes.

Either way the run that stopped its sweep gets a ``sweep_stop`` side record (its load, why it
stopped, the points not run), which the load curve page marks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject
from engine.measure.saturation import RECORD, STOP_RECORD, Verdict, against_previous
from engine.spec.sweep import load_group, load_label, load_of, load_words

if TYPE_CHECKING:
    from engine.run.runner import BenchmarkResult
    from storage import Database
    from storage.jobs import JobInfo

Load = tuple[str, float]


@dataclass(frozen=True)
class Stop:
    """Where a sweep stopped: the saturated point's run and load, and its verdict."""

    run_id: int | None
    load: Load
    verdict: Verdict

    @property
    def because(self) -> str:
        """``saturated at 8 req/s: in-flight requests grew 2.1/s (95 % CI 1.6–2.6) while ...``."""
        return f"saturated at {load_words(self.load)}: {self.verdict.reason}"

    def not_run_reason(self) -> str:
        """What a point above it says: ``not run: saturated at 8 req/s (run 12): ...``."""
        run = f" (run {self.run_id})" if self.run_id is not None else ""
        return f"not run: saturated at {load_words(self.load)}{run}: {self.verdict.reason}"

    def beyond(self, load: Load | None) -> bool:
        """Whether a point at ``load`` lies above this stop on the same axis (so it is not run)."""
        return load is not None and load[0] == self.load[0] and load[1] > self.load[1]


def point_verdict(
    saturation: JSONMapping | None,
    load: Load | None,
    requests_per_s: float | None,
    previous: tuple[float, float] | None = None,
) -> Verdict | None:
    """A point's verdict from its run's ``saturation`` record; a closed loop that one run could not
    judge is judged against ``previous`` (the lower concurrency and its requests/s)."""
    verdict = Verdict.from_dict(saturation)
    if verdict is None or load is None:
        return verdict
    if load[0] == "concurrency" and requests_per_s:
        verdict = against_previous(verdict, previous, (load[1], float(requests_per_s)))
    return verdict


def stop_record(stop: Stop, not_run: list[JSONObject]) -> JSONObject:
    """The ``sweep_stop`` side record: where and why the sweep stopped, and each point not run
    (``{"point": label, "load": value, "job_id": id or None}``)."""
    axis, value = stop.load
    return {
        "stopped_because": stop.because,
        "axis": axis,
        "load": value if math.isfinite(value) else None,
        "verdict": stop.verdict.to_dict(),
        "not_run": not_run,
        "reason": stop.not_run_reason(),
    }


def record_stop(db: Database, stop: Stop, not_run: list[JSONObject]) -> None:
    """Store the stop with the run that made it (nothing without a run)."""
    from storage.series import add_series

    if stop.run_id is not None:
        add_series(db, stop.run_id, STOP_RECORD, stop_record(stop, not_run))


def _previous_point(db: Database, sweep: str, group: str, load: Load) -> tuple[float, float] | None:
    """(concurrency, requests/s) of the group's highest done point below ``load`` (its newest run)."""
    from storage.sweeps import sweep_runs

    best: tuple[float, int, float] | None = None
    for run in sweep_runs(db, sweep):
        other = load_of(run.spec or {})
        rps = (run.metrics or {}).get("requests_per_s")
        if run.status != "done" or not rps or other is None or other[0] != load[0] or other[1] >= load[1]:
            continue
        if load_group(run.spec) == group and (best is None or (other[1], run.id) > best[:2]):
            best = (other[1], run.id, float(rps))
    return None if best is None else (best[0], best[2])


def after_job_run(db: Database, job: JobInfo, result: BenchmarkResult, log: Callable[[str], None]) -> list[int]:
    """In a point's job process, after its run was stored: end the sweep's higher queued points
    when the run is saturated (module doc); the job ids ended."""
    from storage import jobs

    load = load_of(job.spec)
    if not job.sweep or load is None or not math.isfinite(load[1]):
        return []
    group = load_group(job.spec)
    higher = [
        j
        for j in jobs.list_jobs(db, limit=1000, statuses=[jobs.QUEUED], sweep=job.sweep)
        if j.progress_note == jobs.STOPS_AT_SATURATION and load_group(j.spec) == group
    ]
    stop = Stop(result.run_id, load, Verdict(None, "", "none"))
    higher = sorted((j for j in higher if stop.beyond(load_of(j.spec))), key=lambda j: (load_of(j.spec), j.id))
    if not higher:
        return []  # not a sweep that stops here, or nothing left above this point
    previous = _previous_point(db, job.sweep, group, load) if load[0] == "concurrency" else None
    verdict = point_verdict(result.series.get(RECORD), load, result.metrics.get("requests_per_s"), previous)
    if verdict is None or not verdict.saturated:
        return []
    stop = Stop(result.run_id, load, verdict)
    ended = jobs.not_run(db, [j.id for j in higher], stop.not_run_reason())
    rows = [{"point": load_label(load_of(j.spec)), "load": load_of(j.spec)[1], "job_id": j.id} for j in higher]
    record_stop(db, stop, [r for r in rows if r["job_id"] in ended])
    log(f"sweep {job.sweep}: {stop.because}; jobs {', '.join(map(str, ended)) or 'none'} not run")
    return ended
