"""Optuna for a study: its RDB storage on LatencyLab's own database URL, the sampler, ask and tell.

Optuna's tables (``studies``, ``trials``, ``version_info`` ...) are created by Optuna itself
beside LatencyLab's, in the same database, so a study is resumable and visible to every app
instance, and plain Optuna tools (``optuna-dashboard``, ``optuna storage upgrade``) open it too.
``alembic_version`` is Optuna's (LatencyLab's revisions have a table of their own), so Optuna's
schema check runs: a database whose Optuna tables need ``optuna storage upgrade`` is refused with
Optuna's own message. Optuna's first open creates and stamps its tables, so it holds the
database's schema lock (two processes doing it at once would collide). The sampler
holds no state of its own between calls: everything is in the storage, and a sampler is
rebuilt for every ask, seeded by the study's seed and the number of trials so far (so two asks
never replay the same random draws).

Constraints are given per trial with ``Trial.set_constraint`` (Optuna 5; ``constraints_func``
is deprecated), before the trial is told.
"""

from __future__ import annotations

import threading
import warnings

import optuna
from optuna.trial import TrialState

from engine.optimize.study import Params, StudyDefinition
from storage import StorageError, open_database
from storage.db import safe_url

_LOCK = threading.Lock()
_STORAGES: dict[str, optuna.storages.RDBStorage] = {}
SEEDED = "latencylab_seeded"  # study user attribute: the first trials were enqueued
STATES = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED, "fail": TrialState.FAIL}

optuna.logging.set_verbosity(optuna.logging.WARNING)


def rdb_storage(url: str) -> optuna.storages.RDBStorage:
    """Optuna's storage on ``url`` (one per process and URL); :class:`StorageError` when Optuna refuses its tables."""
    with _LOCK:
        storage = _STORAGES.get(url)
        if storage is None:
            kwargs: dict[str, object] = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}
            try:
                with open_database(url).schema_lock():
                    storage = optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
            except StorageError:
                raise
            except RuntimeError as exc:  # Optuna's schema check, in Optuna's words (it names the fix)
                raise StorageError(f"Optuna cannot use the study tables of {safe_url(url)}: {exc}") from exc
            _STORAGES[url] = storage
        return storage


def startup_trials(definition: StudyDefinition) -> int:
    """Trials sampled before TPE models anything: a third of the budget, at least 2, at most 8."""
    return max(2, min(8, definition.budget.trials // 3))


def make_sampler(definition: StudyDefinition, trials_so_far: int) -> optuna.samplers.BaseSampler:
    """The study's sampler for the next ask (grid: every point is enqueued, so any sampler serves)."""
    seed = definition.seed + trials_so_far
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if definition.sampler == "tpe":
            return optuna.samplers.TPESampler(
                seed=seed, n_startup_trials=startup_trials(definition), multivariate=True, group=True
            )
        if definition.sampler == "nsga2":
            size = max(4, min(20, definition.budget.trials // 2))
            return optuna.samplers.NSGAIISampler(seed=seed, population_size=size)
        return optuna.samplers.RandomSampler(seed=seed)


def load(url: str, optuna_name: str, definition: StudyDefinition, trials_so_far: int = 0) -> optuna.Study:
    """The Optuna study (created on first use) with a fresh sampler."""
    return optuna.create_study(
        storage=rdb_storage(url),
        study_name=optuna_name,
        directions=list(definition.directions),
        sampler=make_sampler(definition, trials_so_far),
        load_if_exists=True,
    )


def is_seeded(study: optuna.Study) -> bool:
    return bool(study.user_attrs.get(SEEDED))


def seed(study: optuna.Study, first: list[Params]) -> None:
    """Enqueue the first trials (the base recipe first), once per study."""
    for params in first:
        study.enqueue_trial(params, skip_if_exists=True)
    study.set_user_attr(SEEDED, True)


def waiting(study: optuna.Study) -> int:
    """Enqueued trials not asked yet."""
    return len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def running_numbers(study: optuna.Study) -> set[int]:
    """Numbers of the trials Optuna holds as running (asked, not told)."""
    return {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}


def tell(
    study: optuna.Study,
    url: str,
    number: int,
    state: str,
    values: list[float] | None = None,
    constraints: dict[str, float] | None = None,
) -> bool:
    """Finish trial ``number`` once (``state``: complete, pruned, fail); False when it was already finished."""
    storage = rdb_storage(url)
    study_id = storage.get_study_id_from_name(study.study_name)
    trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
    if storage.get_trial(trial_id).state.is_finished():
        return False
    trial = optuna.trial.Trial(study, trial_id)
    for key, value in (constraints or {}).items():
        trial.set_constraint(key, value)
    study.tell(trial, values=values if state == "complete" else None, state=STATES[state])
    return True
