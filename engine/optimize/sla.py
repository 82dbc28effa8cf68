"""The SLA finder: the highest request rate (or concurrency) a serving recipe sustains under an SLO.

A search (stored by :mod:`storage.sla`) holds a base serving job spec, the SLO
(:mod:`engine.optimize.slo`), a goodput target, the axis, the start load, a resolution and
a probe budget. Each probe is a **real run**: a job queued to the worker with the base spec
at one load (:func:`engine.spec.sweep.rate_axis` / ``concurrency_axis``), stored as a run
in the sweep ``sla:<name>`` (so its probes show in Runs and on the load curve). Which load
comes next is :mod:`engine.optimize.bisect`'s (bracketing by doubling or halving, then
bisection to the resolution).

:func:`advance` is stateless and resumable: it reads the search, judges the probe whose
job has ended, then queues the next probe or writes the answer; every worker calls it in
its step loop (every :data:`ADVANCE_S` seconds), and so does ``python -m engine sla --wait``.
Writes happen at the version read (:func:`storage.sla.queue_probe`), so two callers never
queue a probe twice. A probe whose job ended without metrics (a crash, a bad spec) ends the
search as failed with the job's reason: that is no verdict on the load.

The answer, with its uncertainty: "3.2 req/s (between 3.2 and 3.4) at 99 % goodput":
the highest passing load and the lowest failing one, with the goodput interval of both
boundary probes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.jsonvalue import JSONMapping, JSONObject
from engine.optimize.bisect import Step, bracket, next_step
from engine.optimize.slo import Bound, judge, per_request_limits, slo_words
from engine.spec import JobSpec, SpecError, parse_job_spec
from engine.spec.sweep import build_grid, concurrency_axis, grid_specs, rate_axis
from storage import StorageError, jobs
from storage import sla as store
from storage.runs import get_run

if TYPE_CHECKING:
    from storage import Database
    from storage.job_records import JobInfo

ADVANCE_S = 2.0  # how often a worker advances the running searches
UNITS = {"rate": "req/s", "concurrency": "concurrent requests"}


class SlaDefinition(BaseModel):
    """What a search looks for; stored as its definition."""

    model_config = ConfigDict(extra="forbid")

    base: dict[str, object]  # the serving job spec as JSON (each probe's spec validates it); each probe sets its load
    axis: Literal["rate", "concurrency"] = "rate"
    slo_name: str = "custom"
    slo: list[Bound] = Field(min_length=1)
    goodput: float | None = Field(default=0.99, gt=0, le=1)
    start: float = Field(default=1.0, gt=0, le=1_000_000)
    resolution: float = Field(default=0.25, gt=0, le=1_000_000)
    max_probes: int = Field(default=8, ge=1, le=100)
    timeout_s: float = Field(default=3600.0, gt=0, le=7 * 86_400)

    @property
    def unit(self) -> str:
        return UNITS[self.axis]

    def goal(self) -> str:
        """``TTFT p99 <= 200 ms and ITL p99 <= 50 ms at 99 % goodput``."""
        at = "" if self.goodput is None else f" at {self.goodput * 100:g} % goodput"
        return f"{slo_words(self.slo)}{at}"


def new_definition(base: JobSpec, slo_name: str, slo: list[Bound], **fields: object) -> SlaDefinition:
    """A validated definition from a base serving spec; SpecError with one line when it cannot be searched.

    The SLO's per-request limits are written into the base workload (so each probe stores its
    goodput); a concurrency axis needs whole-number loads and a resolution of at least 1.
    """
    wl = base.workload
    if wl.trials > 1:
        raise SpecError("an SLA probe is one run: drop --trials (use --until-ci for a steadier probe)")
    data = base.model_dump(mode="json")
    data["workload"] = {**data["workload"], **per_request_limits(slo)}
    try:
        definition = SlaDefinition(base=data, slo_name=slo_name, slo=slo, **fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from exc
    if definition.axis == "concurrency":
        if definition.start != int(definition.start) or definition.resolution < 1:
            raise SpecError("a concurrency search starts at a whole number and has a resolution of at least 1")
    probe_spec(definition, definition.start, "check")  # the first probe must be a valid job
    return definition


def probe_spec(definition: SlaDefinition, load: float, search_name: str) -> JobSpec:
    """The job spec of the probe at ``load``: the base spec with that rate (or concurrency)."""
    base = parse_job_spec(definition.base)
    axis = rate_axis([load], base.workload.arrival) if definition.axis == "rate" else concurrency_axis([int(load)])
    points = build_grid(base, [axis])
    spec = grid_specs(points)[0]
    return spec.model_copy(update={"name": f"{search_name} · {points[0].label}"})


def sweep_name(search_name: str) -> str:
    """The sweep the probes' runs are stored under."""
    return f"sla:{search_name}"


def start(db: Database, name: str, definition: SlaDefinition, submitted_by: str | None = None) -> store.SlaSearch:
    """Store a new search and queue its first probe."""
    search = store.create(db, name, definition.model_dump(mode="json"), submitted_by=submitted_by)
    return advance(db, search.id) or search


def advance(db: Database, search_id: int) -> store.SlaSearch | None:
    """Judge the probe whose job ended, then queue the next one or write the answer (idempotent)."""
    search = store.get_search(db, search_id)
    for _ in range(4):  # at most: judge, decide, and a lost race or two
        if search is None or search.is_final or not _step(db, search):
            return search
        search = store.get_search(db, search_id)
    return search


def advance_running(db: Database) -> list[str]:
    """Advance every running search once; one line per change (the worker logs them)."""
    lines = []
    for search_id in store.running_ids(db):
        before = store.get_search(db, search_id)
        try:
            after = advance(db, search_id)
        except StorageError:  # the database is away: the worker retries, the search stays as it is
            raise
        except Exception as exc:  # noqa: BLE001 - one broken search must not stop a worker
            if before is not None:
                store.save(db, before, before.probes, status=store.FAILED, error=f"{type(exc).__name__}: {exc}")
            lines.append(f"sla search {search_id} failed: {type(exc).__name__}: {exc}")
            continue
        if before is not None and after is not None and after.version != before.version:
            lines.append(f"sla search {after.name}: {progress_line(after)}")
    return lines


def _step(db: Database, search: store.SlaSearch) -> bool:
    """One change to ``search``; False when there is nothing to do yet (its probe is still running)."""
    try:
        definition = SlaDefinition.model_validate(search.definition)
    except ValidationError as exc:
        return store.save(db, search, search.probes, status=store.FAILED, error=f"definition unreadable: {exc}")
    probes = [dict(p) for p in search.probes]
    pending = [i for i, p in enumerate(probes) if p.get("status") == "queued"]
    if pending:
        i = pending[0]
        job = jobs.get_job(db, probes[i]["job_id"])
        if job is not None and not job.is_final:
            return False
        probes[i].update(_verdict(db, definition, job))
        if probes[i]["status"] == "error":
            answer = answer_of(definition, probes, None)
            why = f"probe at {probes[i]['load']:g} {definition.unit}: {probes[i]['reasons'][0]}"
            return store.save(db, search, probes, status=store.FAILED, answer=answer, error=why)
        return store.save(db, search, probes)
    step = next_step(
        _results(probes), definition.start, definition.resolution, definition.max_probes, _integer(definition)
    )
    if step.done:
        return store.save(db, search, probes, status=store.DONE, answer=answer_of(definition, probes, step))
    spec = probe_spec(definition, step.next_load, search.name)
    probe = {"load": step.next_load, "status": "queued", "why": step.why}
    store.queue_probe(db, search, probes, spec, probe, sweep=sweep_name(search.name), timeout_s=definition.timeout_s)
    return True  # queued, or another caller changed the search first: read it again


def _verdict(db: Database, definition: SlaDefinition, job: JobInfo | None) -> JSONObject:
    """A probe's outcome from its ended job: passed / failed (with reasons) / error (no verdict)."""
    if job is None:
        return {"status": "error", "reasons": ["its job is gone"]}
    run = get_run(db, job.run_id) if job.run_id is not None else None
    if run is None or not run.metrics:
        return {"status": "error", "reasons": [job.error or f"its job ended {job.status} without a run"]}
    verdict = judge(definition.slo, definition.goodput, run.metrics)
    if run.status != "done":
        verdict["passed"] = False
        verdict["reasons"] = [*verdict["reasons"], f"the run failed: {run.error}"]
    passed = verdict.pop("passed")
    return {"status": "passed" if passed else "failed", "run_id": run.id, **verdict}


def _results(probes: list[JSONObject]) -> list[tuple[float, bool]]:
    return [(float(p["load"]), p["status"] == "passed") for p in probes if p.get("status") in ("passed", "failed")]


def _integer(definition: SlaDefinition) -> bool:
    return definition.axis == "concurrency"


def answer_of(definition: SlaDefinition, probes: list[JSONObject], step: Step | None) -> JSONObject:
    """The answer: the bracket, whether it converged, its sentence and the boundary probes."""
    low, high = bracket(_results(probes))
    converged = bool(step and step.converged)
    by_load = {float(p["load"]): p for p in probes if p.get("status") in ("passed", "failed")}
    boundary = {
        side: {k: by_load[x].get(k) for k in ("load", "run_id", "goodput_ci", "values")}
        for side, x in (("low", low), ("high", high))
        if x is not None
    }
    return {
        "low": low,
        "high": high,
        "converged": converged,
        "unit": definition.unit,
        "goal": definition.goal(),
        "slo": [b.model_dump() for b in definition.slo],
        "goodput": definition.goodput,
        "probes": len(_results(probes)),
        "why": step.why if step else "a probe ended without a verdict",
        "text": answer_text(definition, low, high, converged),
        "boundary": boundary,
    }


def answer_text(definition: SlaDefinition, low: float | None, high: float | None, converged: bool) -> str:
    """``3.2 req/s (between 3.2 and 3.4) at 99 % goodput``, or what is known when it did not converge."""
    unit = definition.unit
    at = "" if definition.goodput is None else f" at {definition.goodput * 100:g} % goodput"
    if low is None and high is None:
        return "no answer: no probe ended with a verdict"
    if low is None:
        return f"none: the SLO fails even at {high:g} {unit}{at}"
    if high is None:
        return f"at least {low:g} {unit}{at} (no failing load found)"
    tail = "" if converged else "; not converged within the probe budget"
    return f"{low:g} {unit} (between {low:g} and {high:g}{tail}){at}"


def boundary_words(answer: JSONMapping) -> str:
    """``highest passing 2 req/s (run 5, goodput 96.7 %, 95 % CI 83-99.9 %); lowest failing ...``."""
    parts = []
    for side, words in (("low", "highest passing"), ("high", "lowest failing")):
        probe = (answer.get("boundary") or {}).get(side)
        if not probe:
            continue
        good = (probe.get("values") or {}).get("goodput_fraction")
        ci = probe.get("goodput_ci")
        detail = f"run {probe.get('run_id')}"
        if good is not None:
            detail += f", goodput {good * 100:.1f} %"
        if ci:
            detail += f", 95 % CI {ci[0] * 100:.1f}-{ci[1] * 100:.1f} %"
        parts.append(f"{words} {probe['load']:g} {answer.get('unit', '')} ({detail})")
    return "; ".join(parts)


def progress_line(search: store.SlaSearch) -> str:
    """One line on where a search stands (the CLI's and the worker's log)."""
    if search.status == store.FAILED:
        return f"failed: {search.error}"
    if search.answer and search.is_final:
        return f"{search.status}: {search.answer['text']}"
    if not search.probes:
        return search.status
    unit = UNITS.get(search.definition.get("axis", "rate"), "")
    parts = []
    for i, p in list(enumerate(search.probes, 1))[-2:]:  # the last verdict and the probe queued after it
        reasons = f" ({'; '.join(p['reasons'])})" if p.get("reasons") else ""
        parts.append(f"probe {i} at {p['load']:g} {unit}: {p['status']}{reasons}")
    return "; ".join(parts)


def report(search: store.SlaSearch) -> JSONObject:
    """A search as one JSON object (``sla --json``, the page)."""
    return {
        "name": search.name,
        "status": search.status,
        "sweep": sweep_name(search.name),
        "answer": search.answer,
        "error": search.error,
        "goal": SlaDefinition.model_validate(search.definition).goal(),
        "probes": search.probes,
        "created_at": search.created_at.isoformat(),
        "submitted_by": search.submitted_by,
    }
