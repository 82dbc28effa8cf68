"""Driving a study: :func:`advance` tells Optuna about finished trials and asks for new ones.

``advance`` is stateless: everything it needs is in the database (LatencyLab's study and
trial rows, Optuna's tables), so the worker's step loop (every few seconds, see
:func:`advance_all`) and ``python -m engine optimize --wait`` can both call it, and a killed
worker resumes where it was. One caller at a time holds the study's lease.

One call:

1. seeds a new study once: the base recipe is trial 0, then the recipes the what-if
   estimator predicts best among the one-knob changes of the base (a grid study enqueues
   every point of the space instead);
2. settles every pending trial whose job ended: a done run is evaluated (objectives,
   constraints, feasibility) and told COMPLETE; a failed or cancelled job is told FAIL with
   its reason, except a job lost with its worker, which is queued once more (so a killed
   worker never costs a trial); a trial is told once, whoever calls;
3. asks for new trials while the budget lasts and fewer than ``parallel`` are in flight; a
   trial whose recipe the rules refuse, or the estimator says does not fit, is PRUNED with
   the reason; one whose recipe this study already has is a duplicate (told FAIL, not
   counted); one whose spec fingerprint was measured before reuses that run; every other
   one is queued as a real job (with the accuracy phase its constraints need);
4. ends the study (``done``) when the budget is spent and nothing is in flight.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONObject
from engine.measure import registry
from engine.optimize import sampling
from engine.optimize.evaluate import evaluate, figures
from engine.optimize.predict import PREDICTED, Predictor, does_not_fit, predictor
from engine.optimize.space import Space, build_space, trial_spec
from engine.optimize.study import PPL_INCREASE, Params, StudyDefinition
from engine.spec import JobSpec, SpecError, canonical_json
from storage import jobs, studies
from storage.runs import get_run
from storage.studies import COMPLETE, DUPLICATE, FAILED, PENDING, PRUNED, RUNNING, StudyInfo, TrialInfo

if TYPE_CHECKING:
    import optuna

    from storage import Database
    from storage.runs import RunDetail

MAX_ASKS_PER_CALL = 50  # pruned and duplicate asks cost no measurement; bound one call anyway
RETRIES_AFTER_WORKER_LOST = 1
JobState = tuple[str, int | None, str | None]  # a trial's job: its status, run id and error (studies.job_statuses)


@dataclass
class Advanced:
    """What one :func:`advance` call did."""

    study: str
    status: str
    told: int = 0
    asked: int = 0
    pending: int = 0
    lines: list[str] = field(default_factory=list)
    busy: bool = False  # another caller was advancing it


@dataclass
class _Context:
    db: Database
    study: StudyInfo
    definition: StudyDefinition
    base: JobSpec
    space: Space
    trials: list[TrialInfo]
    out: Advanced
    exhausted: bool = False  # every recipe of the space was tried
    _predict: Predictor | None = None

    def predict(self, spec: JobSpec) -> JSONObject:
        if self._predict is None:
            self._predict = predictor(self.db, self.base)
        return self._predict(spec)

    def say(self, line: str) -> None:
        self.out.lines.append(f"study {self.study.name}: {line}")


def default_owner() -> str:
    """Who holds a study's lease: this host, process and thread."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def advance(db: Database, key: str | int, *, owner: str | None = None) -> Advanced:
    """One round of a study (by name or id); ValueError when there is none."""
    study = studies.get_study(db, key)
    if study is None:
        raise ValueError(f"no study {key!r}; list them with: python -m engine optimize list")
    owner = owner or default_owner()
    if not studies.try_lock(db, study.id, owner):
        return Advanced(study.name, study.status, busy=True)  # another caller holds the lease: nothing to say
    try:
        return _advance(db, study)
    finally:
        studies.unlock(db, study.id, owner)


def _advance(db: Database, study: StudyInfo) -> Advanced:
    definition = StudyDefinition.model_validate(study.definition)
    trials = studies.list_trials(db, study.id)
    out = Advanced(study.name, study.status)
    if study.is_final and not any(t.status == PENDING for t in trials):
        return out
    ctx = _Context(db, study, definition, definition.effective_base(), build_space(definition), trials, out)
    ostudy = sampling.load(db.url, study.optuna_name, definition, len(trials))
    if not sampling.is_seeded(ostudy):
        _seed(ctx, ostudy)
    out.told += _settle_all(ctx, ostudy)
    _fail_orphans(ctx, ostudy)
    if study.status == RUNNING and _base_usable(ctx):
        out.asked = _ask_new(ctx, ostudy)
        out.told += _settle_all(ctx, ostudy)  # reused runs are told at once
    out.pending = sum(1 for t in ctx.trials if t.status == PENDING)
    out.status = _maybe_done(ctx, ostudy)
    return out


# -- seeding ----------------------------------------------------------------------------------
def _seed(ctx: _Context, ostudy: optuna.Study) -> None:
    """Trial 0 is the base recipe; then the grid (grid studies) or the estimator's best one-knob changes."""
    base = ctx.space.base_params()
    if ctx.definition.sampler == "grid":
        rest = [p for p in ctx.space.grid() if p != base]
    else:
        rest = _estimator_picks(ctx, base, sampling.startup_trials(ctx.definition) - 1)
    sampling.seed(ostudy, [base, *rest])
    ctx.say(f"seeded with the base recipe and {len(rest)} more trial(s)")


def predicted_figure(objective: str) -> tuple[str, bool] | None:
    """The estimator's figure that orders the first trials for an objective (its latency group, or the
    figure itself: ``tpot_ms_p90`` -> ``tpot_ms``) and whether smaller is better; None when it predicts none."""
    metric = registry.lookup(objective)
    figure = metric.group or objective
    return (figure, metric.minimise) if metric.is_metric and figure in PREDICTED else None


def _estimator_picks(ctx: _Context, base: Params, count: int) -> list[Params]:
    """The one-knob changes of the base the estimator predicts best on the first objective."""
    order = predicted_figure(ctx.definition.objective_keys[0])
    if order is None or count <= 0:
        return []
    key, smaller = order
    scored = []
    for knob in ctx.space.knobs:
        for value in knob.values[1:]:
            params = {**base, knob.name: value}
            try:
                predicted = ctx.predict(trial_spec(ctx.base, params)).get(key)
            except SpecError:
                continue
            if predicted is not None:
                scored.append((predicted if smaller else -predicted, params))
    scored.sort(key=lambda item: item[0])
    return [params for _, params in scored[:count]]


# -- settling finished trials -------------------------------------------------------------------
def _settle_all(ctx: _Context, ostudy: optuna.Study) -> int:
    pending = [t for t in ctx.trials if t.status == PENDING]
    states = studies.job_statuses(ctx.db, [t.job_id for t in pending if t.job_id is not None])
    told = 0
    for trial in sorted(pending, key=lambda t: t.number):
        updated = _settle(ctx, ostudy, trial, states)
        if updated is not None:
            _replace(ctx, updated)
            told += updated.status != PENDING
    return told


def _settle(ctx: _Context, ostudy: optuna.Study, trial: TrialInfo, states: dict[int, JobState]) -> TrialInfo | None:
    """Tell one pending trial if its run is there (or its job failed); None when it must wait."""
    run_id = trial.run_id
    if trial.job_id is not None:
        status, run_id, error = states.get(trial.job_id, (None, None, "its job is gone"))
        if status in (jobs.QUEUED, jobs.RUNNING):
            return None
        if status == jobs.FAILED and (error or "").startswith(jobs.WORKER_LOST):
            if trial.attempts <= RETRIES_AFTER_WORKER_LOST:
                new_id = jobs.retry(ctx.db, trial.job_id, by=ctx.study.submitted_by)
                ctx.say(f"trial {trial.number}: job {trial.job_id} lost with its worker, queued again as {new_id}")
                return studies.update_trial(ctx.db, trial.id, job_id=new_id, attempts=trial.attempts + 1)
        if status != jobs.DONE or run_id is None:
            return _fail(ctx, ostudy, trial, f"job {trial.job_id} {status or 'missing'}: {error or 'no run'}")
    run = get_run(ctx.db, run_id) if run_id is not None else None
    if run is None or run.status != "done":
        return _fail(ctx, ostudy, trial, f"run {run_id} is missing or failed")
    base_figures = _base_figures(ctx, trial, run)
    if base_figures is None:
        return None  # the base trial is still running: its perplexity is the yardstick
    outcome = evaluate(ctx.definition, run, base_figures)
    if outcome.values is None:
        return _fail(ctx, ostudy, trial, f"run {run_id} did not measure {outcome.missing}", run_id=run_id)
    sampling.tell(ostudy, ctx.db.url, trial.number, "complete", outcome.values, outcome.violations())
    ctx.say(f"trial {trial.number} measured (run {run_id}): {'feasible' if outcome.feasible else 'infeasible'}")
    return studies.update_trial(
        ctx.db,
        trial.id,
        status=COMPLETE,
        run_id=run_id,
        values=outcome.values,
        measured=outcome.measured,
        constraints=outcome.constraints,
        feasible=outcome.feasible,
        reason="; ".join(outcome.broken) or None,
    )


def _needs_base(definition: StudyDefinition) -> bool:
    c = definition.constraints
    return c.max_ppl_increase_pct is not None or PPL_INCREASE in definition.objective_keys


def _base_figures(ctx: _Context, trial: TrialInfo, run: RunDetail) -> Mapping[str, float | None] | None:
    """The yardstick of relative figures: the base trial's; {} when none is needed or it cannot come."""
    if trial.number == 0:
        return figures(run, None)
    base = next((t for t in ctx.trials if t.number == 0), None)
    if base is not None and base.status == COMPLETE:
        return base.measured
    if _needs_base(ctx.definition) and (base is None or base.status == PENDING):
        return None
    return {}


def _base_usable(ctx: _Context) -> bool:
    """False (and the study ends) when the base recipe, the yardstick of its constraints, failed."""
    base = next((t for t in ctx.trials if t.number == 0), None)
    if base is None or base.status in (PENDING, COMPLETE) or not _needs_base(ctx.definition):
        return True
    note = f"the base recipe (trial 0) {base.status}: {base.reason}; the perplexity increase has no yardstick"
    studies.set_status(ctx.db, ctx.study.id, studies.DONE, note)
    ctx.say(note)
    return False


def _fail(ctx: _Context, ostudy: optuna.Study, trial: TrialInfo, reason: str, **fields: object) -> TrialInfo | None:
    sampling.tell(ostudy, ctx.db.url, trial.number, "fail")
    ctx.say(f"trial {trial.number} failed: {reason}")
    return studies.update_trial(ctx.db, trial.id, status=FAILED, reason=reason, **fields)


def _fail_orphans(ctx: _Context, ostudy: optuna.Study) -> None:
    """Optuna trials asked by a caller that died before recording them: told FAIL, once."""
    known = {t.number for t in ctx.trials}
    for number in sorted(sampling.running_numbers(ostudy) - known):
        sampling.tell(ostudy, ctx.db.url, number, "fail")
        ctx.say(f"trial {number} was asked but never queued (its caller stopped); told as failed")


def _replace(ctx: _Context, trial: TrialInfo) -> None:
    ctx.trials = [trial if t.id == trial.id else t for t in ctx.trials]


# -- asking for new trials ----------------------------------------------------------------------
def budget_spent(definition: StudyDefinition, study: StudyInfo, trials: list[TrialInfo]) -> str | None:
    """Why no more trials may start (budget, wall time, too many refused asks), or None."""
    counted = sum(1 for t in trials if t.status in (PENDING, COMPLETE, FAILED))
    if counted >= definition.budget.trials:
        return f"budget spent: {counted} trial(s)"
    minutes = definition.budget.max_minutes
    if minutes is not None and (datetime.now(UTC) - study.created_at).total_seconds() >= minutes * 60:
        return f"wall-time budget spent: {minutes:g} min"
    if len(trials) >= definition.budget.trials * 10 + 20:
        return "the sampler keeps proposing recipes that were measured already or cannot run"
    return None


def _ask_new(ctx: _Context, ostudy: optuna.Study) -> int:
    asked = 0
    while (
        asked < MAX_ASKS_PER_CALL and not ctx.exhausted and budget_spent(ctx.definition, ctx.study, ctx.trials) is None
    ):
        in_flight = sum(1 for t in ctx.trials if t.status == PENDING and t.job_id is not None)
        if in_flight >= ctx.definition.budget.parallel:
            break
        if ctx.definition.sampler == "grid" and sampling.waiting(ostudy) == 0:
            break
        ostudy.sampler = sampling.make_sampler(ctx.definition, len(ctx.trials))
        trial = ostudy.ask()
        ctx.trials.append(_start(ctx, ostudy, trial.number, ctx.space.suggest(trial)))
        asked += 1
    return asked


def _start(ctx: _Context, ostudy: optuna.Study, number: int, params: Params) -> TrialInfo:
    """Record trial ``number``: pruned, a duplicate, a reused run, or a queued job."""
    from engine.jobs.submission import check_submittable

    try:
        spec = trial_spec(ctx.base, params, f"{ctx.study.name} · trial {number}")
    except SpecError as exc:
        return _prune(ctx, ostudy, number, params, str(exc))
    fp = spec.fingerprint()
    same = next((t for t in ctx.trials if t.fingerprint == fp and t.status in (PENDING, COMPLETE)), None)
    if same is not None:
        sampling.tell(ostudy, ctx.db.url, number, "fail")
        _explore(ctx, ostudy, number, params)
        why = f"same recipe as trial {same.number}"
        return studies.add_trial(ctx.db, ctx.study.id, number, params, status=DUPLICATE, reason=why, fingerprint=fp)
    predicted = ctx.predict(spec)
    problem = does_not_fit(predicted) if ctx.definition.constraints.fit_memory else None
    if problem is None:
        try:
            check_submittable(ctx.db, spec)
        except SpecError as exc:
            problem = str(exc)
    if problem is not None:
        return _prune(ctx, ostudy, number, params, problem, fingerprint=fp, predicted=predicted)
    run_id = studies.measured_run(ctx.db, fp, ctx.definition.quality_keys()) if ctx.definition.reuse else None
    if run_id is not None:
        ctx.say(f"trial {number} reuses run {run_id} (same recipe measured before)")
        fields = {"fingerprint": fp, "run_id": run_id, "reused": True, "predicted": predicted}
        return studies.add_trial(ctx.db, ctx.study.id, number, params, **fields)
    trial = studies.add_trial(
        ctx.db,
        ctx.study.id,
        number,
        params,
        spec=spec,
        timeout_s=ctx.definition.timeout_s,
        submitted_by=ctx.study.submitted_by,
        predicted=predicted,
    )
    ctx.say(f"trial {number} queued as job {trial.job_id}")
    return trial


def _explore(ctx: _Context, ostudy: optuna.Study, number: int, params: Params) -> None:
    """The sampler proposed a recipe it has (TPE settles on its best): enqueue an untried point of
    the space instead, picked at random; none left means the space is exhausted."""
    tried = {canonical_json(t.params) for t in ctx.trials} | {canonical_json(params)}
    untried = [p for p in ctx.space.grid() if canonical_json(p) not in tried]
    if untried:
        ostudy.enqueue_trial(random.Random(ctx.definition.seed + number).choice(untried))
    else:
        ctx.exhausted = True


def _prune(
    ctx: _Context, ostudy: optuna.Study, number: int, params: Params, reason: str, **fields: object
) -> TrialInfo:
    sampling.tell(ostudy, ctx.db.url, number, "pruned", constraints={"runs": 1.0})
    return studies.add_trial(ctx.db, ctx.study.id, number, params, status=PRUNED, reason=reason, **fields)


def _maybe_done(ctx: _Context, ostudy: optuna.Study) -> str:
    """End a running study whose budget is spent (or grid exhausted) with nothing in flight."""
    current = studies.get_study(ctx.db, ctx.study.id)
    status = current.status if current else ctx.study.status
    if status != RUNNING or any(t.status == PENDING for t in ctx.trials):
        return status
    why = budget_spent(ctx.definition, ctx.study, ctx.trials)
    if why is None and ctx.definition.sampler == "grid" and sampling.waiting(ostudy) == 0:
        why = "every point of the grid was tried"
    if why is None and ctx.exhausted:
        why = "every recipe of the space was tried"
    if why is None:
        return status
    studies.set_status(ctx.db, ctx.study.id, studies.DONE, why)
    ctx.say(f"done ({why})")
    return studies.DONE


def advance_all(db: Database) -> list[str]:
    """The worker's hook: advance every study that is running, paused, or has trials in flight.

    A study that cannot be advanced (its definition no longer reads, Optuna refuses) keeps the
    reason as its note; the worker goes on."""
    lines: list[str] = []
    for study_id in studies.active_study_ids(db):
        try:
            lines += advance(db, study_id).lines
        except Exception as exc:  # noqa: BLE001 - one broken study must not stop the worker
            note = f"cannot advance: {type(exc).__name__}: {exc}"
            studies.set_note(db, study_id, note)
            lines.append(f"study {study_id}: {note}")
    return lines
