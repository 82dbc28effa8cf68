"""Benchmark suites: a named set of job specs with gates, read from a YAML/JSON file or the database,
queued as jobs (optionally under a tag that names a baseline), and queued on a cron schedule.

A suite file::

    name: demo
    gates:                       # apply to every entry
      - {metric: tpot_ms_p50, max_regression_pct: 5, significant: true}
      - {metric: quality.perplexity, max_increase_pct: 1}
    entries:
      - name: fp32
        spec: {model: {source: demo}, workload: {requests: 30, output_tokens: 16}}
        gates: [{metric: quality.task:my_task.jsonl, min: 0.4}]   # this entry only

Queuing or scheduling a file also stores it by name, so ``NAME`` works afterwards. A
schedule's due time is claimed in one transaction with the jobs it queues
(:func:`storage.suites.claim_due`): two workers on one database queue it once.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.report.gates import Gate
from engine.spec import JobSpec, SpecError, format_validation_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from engine.report.gates import CheckReport
    from storage import Database
    from storage.suites import Schedule

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$"


class SuiteError(SpecError):
    """A suite that cannot be read, stored or scheduled; one line, exit 2 on the command line."""


class Entry(BaseModel):
    """One job of a suite: a name, a full job spec, and gates of its own (added to the suite's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    spec: JobSpec
    gates: list[Gate] = Field(default_factory=list)

    def job_spec(self, suite: str) -> JobSpec:
        """The spec as queued: named ``suite/entry`` unless it has a name (the name is not in the fingerprint)."""
        return self.spec if self.spec.name else self.spec.model_copy(update={"name": f"{suite}/{self.name}"})


class Suite(BaseModel):
    """A named set of job specs with gates per metric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    gates: list[Gate] = Field(default_factory=list, description="gates of every entry")
    entries: list[Entry] = Field(min_length=1)

    @field_validator("entries")
    @classmethod
    def _distinct(cls, entries: list[Entry]) -> list[Entry]:
        names = [e.name for e in entries]
        if len(set(names)) != len(names):
            raise ValueError(
                f"entry names must be distinct: {', '.join(sorted({n for n in names if names.count(n) > 1}))}"
            )
        seen: dict[str, str] = {}
        for e in entries:
            fp = e.spec.fingerprint()
            if fp in seen:
                raise ValueError(
                    f"entries {seen[fp]} and {e.name} have the same spec (their runs could not be told apart)"
                )
            seen[fp] = e.name
        return entries

    @model_validator(mode="after")
    def _some_gate(self) -> Suite:
        if not self.gates and not any(e.gates for e in self.entries):
            raise ValueError("a suite needs at least one gate (suite-wide `gates:` or an entry's `gates:`)")
        return self

    def gates_of(self, entry: Entry) -> list[Gate]:
        return [*self.gates, *entry.gates]

    def items(self) -> list[tuple[str, JobSpec]]:
        """``(entry name, spec as queued)`` for every entry."""
        return [(e.name, e.job_spec(self.name)) for e in self.entries]


# -- reading -------------------------------------------------------------------------------
def parse_suite(data: object, where: str = "suite") -> Suite:
    """Validate a suite from parsed YAML/JSON; SuiteError with one line."""
    if not isinstance(data, dict):
        raise SuiteError(f"{where} must hold a mapping with name, gates and entries")
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(f"{where}: {format_validation_error(exc)}") from exc


def load_suite_file(path: str | Path) -> Suite:
    """Read and validate a suite file (``.yaml``/``.yml`` or ``.json``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read suite file {p}: {exc.strerror or exc}") from exc
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except (ValueError, ImportError) as exc:  # json.JSONDecodeError is a ValueError
        raise SuiteError(f"suite file {p} is not valid {p.suffix.lstrip('.') or 'YAML'}: {_first_line(exc)}") from exc
    except Exception as exc:  # yaml.YAMLError has no common base with ValueError
        raise SuiteError(f"suite file {p} is not valid YAML: {_first_line(exc)}") from exc
    return parse_suite(data, where=str(p))


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _looks_like_file(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml", ".json")) or "/" in ref or Path(ref).is_file()


def resolve_suite(db: Database, ref: str, *, store: bool = True) -> tuple[Suite, str | None]:
    """The suite of ``ref`` (a file path, else a stored name) and its file (None when stored).

    A file is stored by its suite name (``store``), so later calls can name it.
    """
    from storage import suites as stored

    if _looks_like_file(ref):
        suite = load_suite_file(ref)
        source = str(Path(ref).resolve())
        if store:
            stored.save_suite(db, suite.name, suite.model_dump(mode="json"), source)
        return suite, source
    found = stored.get_suite(db, ref)
    if found is None:
        names = [s.name for s in stored.list_suites(db)]
        hint = f"stored suites: {', '.join(names)}" if names else "no suite is stored yet; give a suite file"
        raise SuiteError(f"no suite file or stored suite named {ref!r} ({hint})")
    return parse_suite(found.body, where=f"stored suite {ref}"), None


# -- queueing ------------------------------------------------------------------------------
def check_tag(tag: str | None) -> str | None:
    """A tag names a baseline: letters, digits, ``_.-``, not all digits (those are run ids)."""
    import re

    if tag is None:
        return None
    if not re.match(NAME_PATTERN, tag) or tag.isdigit():
        raise SuiteError(f"tag {tag!r} must be letters, digits, '_', '.' or '-' and not all digits (those are run ids)")
    return tag


def queue_suite(
    db: Database,
    suite: Suite,
    tag: str | None = None,
    timeout_s: float = 3600.0,
    check: Callable[[Database, JobSpec], object] | None = None,
) -> list[int]:
    """Queue every entry as a job (all or none), recorded under ``tag``; the job ids.

    ``check(db, spec)`` runs before anything is queued (the CLI passes the pre-flight of ``submit``).
    """
    from storage import suites as stored

    check_tag(tag)
    items = suite.items()
    if check is not None:
        for name, spec in items:
            try:
                check(db, spec)
            except SpecError as exc:
                raise SuiteError(f"entry {name}: {exc}") from exc
    return stored.queue_suite(db, suite.name, items, tag=tag, timeout_s=timeout_s)


# -- schedules -----------------------------------------------------------------------------
def check_cron(cron: str) -> str:
    from croniter import croniter

    if not croniter.is_valid(cron):
        raise SuiteError(f"{cron!r} is not a cron expression (five fields, e.g. '0 2 * * *' for 02:00 every day)")
    return cron


def schedule_suite(db: Database, ref: str, cron: str, tag: str | None = None, now: float | None = None) -> Schedule:
    """Schedule the suite of ``ref`` (file or stored name): its due times after now are queued by workers."""
    from storage import suites as stored

    check_cron(cron)
    check_tag(tag)
    suite, source = resolve_suite(db, ref)
    return stored.set_schedule(
        db, suite.name, cron, since_ts=int(now if now is not None else time.time()), file=source, tag=tag
    )


def due_time(cron: str, now: float) -> int:
    """The latest due time of ``cron`` at or before ``now`` (epoch seconds, UTC)."""
    from croniter import croniter

    base = datetime.fromtimestamp(now, tz=UTC)
    if croniter.match(cron, base):  # due this very minute
        return int(base.replace(second=0, microsecond=0).timestamp())
    return int(croniter(cron, base).get_prev(datetime).timestamp())


def is_due(schedule: Schedule, now: float) -> int | None:
    """The due time to queue for ``schedule`` now, or None when it is not due."""
    due = due_time(schedule.cron, now)
    done = max(schedule.since_ts, schedule.last_due_ts or 0)
    return due if due > done else None


def _suite_of(db: Database, schedule: Schedule) -> Suite:
    """The schedule's suite: its file when it can still be read (a team edits it), else the stored copy."""
    if schedule.file and Path(schedule.file).is_file():
        suite = load_suite_file(schedule.file)
        if suite.name == schedule.suite:  # a file renamed to another suite keeps its old schedule's copy
            return resolve_suite(db, schedule.file)[0]
    return resolve_suite(db, schedule.suite, store=False)[0]


def queue_due(db: Database, now: float | None = None) -> list[str]:
    """Queue every schedule that is due (once per due time, whatever the number of workers); what was done."""
    from storage import suites as stored

    now = time.time() if now is None else now
    said = []
    for schedule in stored.list_schedules(db):
        due = is_due(schedule, now)
        if due is None:
            continue
        try:
            suite = _suite_of(db, schedule)
        except SpecError as exc:
            stored.claim_due(db, schedule.id, due, [])  # claimed, nothing queued: retried at the next due time
            said.append(f"schedule of suite {schedule.suite}: not queued ({exc})")
            continue
        job_ids = stored.claim_due(db, schedule.id, due, suite.items())
        if job_ids:
            when = datetime.fromtimestamp(due, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
            said.append(f"suite {suite.name} due {when}: queued jobs {', '.join(map(str, job_ids))}")
    return said


def next_due(cron: str, now: float | None = None) -> datetime:
    """The next due time of ``cron`` after ``now`` (UTC)."""
    from croniter import croniter

    base = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return croniter(cron, base).get_next(datetime)


# -- checking ------------------------------------------------------------------------------
def _needs_requests(gates: list[Gate]) -> bool:
    from engine.report.gates import latency_percentile

    return any(latency_percentile(g.metric) is not None for g in gates)


def _baselines(db: Database, suite: Suite, against: str) -> dict[str, int]:
    """``{entry: baseline run id}`` for ``against``: a run id (every entry's baseline) or a tag."""
    from storage import suites as stored
    from storage.runs import get_run

    if against.isdigit():
        run = get_run(db, int(against))
        if run is None:
            raise SuiteError(f"there is no run {against} to check against")
        if run.status != "done":
            raise SuiteError(f"baseline run {against} {run.status}: {run.error or 'no reason stored'}")
        return {e.name: run.id for e in suite.entries}
    if not stored.has_tag(db, suite.name, against):
        known = stored.get_suite(db, suite.name)
        tags = ", ".join(known.tags) if known and known.tags else "none yet (queue one: suite run FILE --tag TAG)"
        raise SuiteError(f"no job of suite {suite.name} was queued under tag {against!r}; its tags: {tags}")
    return stored.tagged_runs(db, suite.name, against)


def check_suite(db: Database, suite: Suite, against: str) -> CheckReport:
    """Each entry's newest run (by spec fingerprint) against its baseline; a :class:`~engine.report.gates.CheckReport`."""
    from engine.report.gates import EntryCheck, check_entries
    from storage import suites as stored
    from storage.runs import get_requests, get_run

    bases = _baselines(db, suite, against)
    newest = stored.newest_runs(db, [e.spec.fingerprint() for e in suite.entries])
    checks = []
    for entry in suite.entries:
        gates = suite.gates_of(entry)
        base_id, new_id = bases.get(entry.name), newest.get(entry.spec.fingerprint())
        check = EntryCheck(entry.name, gates, get_run(db, base_id) if base_id else None, None)
        check.new_run = get_run(db, new_id) if new_id else None
        if _needs_requests(gates) and check.base_run is not None and check.new_run is not None:
            check.base_requests, check.new_requests = get_requests(db, base_id), get_requests(db, new_id)
        checks.append(check)
    label = f"run {against}" if against.isdigit() else f"tag {against}"
    return check_entries(suite.name, label, checks)


def entry_fingerprints(db: Database) -> dict[tuple[str, str], str]:
    """``{(suite, entry): spec fingerprint}`` of every stored suite (for the History page's picker)."""
    from storage import suites as stored

    out: dict[tuple[str, str], str] = {}
    for found in stored.list_suites(db):
        try:
            suite = parse_suite(found.body, where=f"stored suite {found.name}")
        except SuiteError:
            continue  # stored by an older version whose rules changed: not offered
        out.update({(suite.name, e.name): e.spec.fingerprint() for e in suite.entries})
    return out
