"""Driving a study with the worker's part played by hand: the base is trial 0, every trial is a
real queued job, a broken constraint is never feasible, measured recipes are reused, and a
killed worker costs no trial and repeats no told one."""

from __future__ import annotations

from study_helpers import create, definition, run_job

from engine.optimize import sampling
from engine.optimize.control import change
from engine.optimize.driver import advance, advance_all
from engine.optimize.space import build_space, trial_spec
from engine.optimize.summary import best_sentence
from storage import jobs, studies
from storage.runs import NewRun, save_run


def _figures(params: dict) -> tuple[float, float]:
    """(TPOT, perplexity) a recipe 'measures' here: int8 is fast but breaks perplexity."""
    if params.get("quantization") == "torch_dynamic_int8":
        return 20.0, 60.0
    return (40.0, 20.1) if params.get("dtype") == "bfloat16" else (50.0, 20.0)


def _pending(db, study_id):
    return [t for t in studies.list_trials(db, study_id) if t.status == studies.PENDING]


def _drive(db, study, rounds: int = 40):
    """Advance, measure the pending trial's job, until the study is done."""
    for _ in range(rounds):
        advance(db, study.name)
        pending = _pending(db, study.id)
        if not pending:
            break
        [trial] = pending
        run_job(db, trial.job_id, *_figures(trial.params))
    return studies.get_study(db, study.id), studies.list_trials(db, study.id)


def _optuna_states(db, study):
    ostudy = sampling.load(db.url, study.optuna_name, definition())
    return {t.number: t.state.name for t in ostudy.get_trials(deepcopy=False)}


def test_trials_are_jobs_the_base_first_and_a_broken_constraint_is_never_feasible(db):
    study = create(db, budget={"trials": 4})
    first = advance(db, "s1")
    [trial0] = studies.list_trials(db, study.id)
    assert trial0.number == 0 and trial0.params == {"dtype": "auto", "quantization": "none"}
    job = jobs.get_job(db, trial0.job_id)
    assert job.status == "queued" and job.spec["quality"]["metrics"] == ["ppl"] and job.name == "s1 · trial 0"
    assert first.pending == 1 and "no measured hardware entry" in trial0.predicted["note"]
    study, trials = _drive(db, study)
    assert study.status == "done" and study.note.startswith("budget spent")
    measured = [t for t in trials if t.status == "complete"]
    assert len([t for t in trials if t.status in ("complete", "failed", "pending")]) == 4
    for t in measured:
        assert t.feasible == (t.measured["ppl_increase_pct"] <= 2.0), t
        if t.params["quantization"] == "torch_dynamic_int8":
            assert not t.feasible and "perplexity increase <= 2 %" in t.reason
    states = _optuna_states(db, study)
    assert sorted(states) == [t.number for t in trials]  # every Optuna trial is one of ours, told
    assert set(states.values()) <= {"COMPLETE", "PRUNED", "FAIL"}
    sentence = best_sentence(definition(), trials)
    assert "dynamic int8" not in sentence.split(":")[0]


def test_a_grid_study_tries_every_point_and_prunes_the_refused_combination(db):
    study = create(db, sampler="grid", budget={"trials": 20})
    study, trials = _drive(db, study)
    assert study.status == "done" and study.note == "every point of the grid was tried"
    pruned = [t for t in trials if t.status == "pruned"]
    assert [t.params for t in pruned] == [{"dtype": "bfloat16", "quantization": "torch_dynamic_int8"}]
    assert "torch_dynamic_int8 quantizes float32 Linear layers" in pruned[0].reason
    assert len([t for t in trials if t.status == "complete"]) == 5
    assert "bfloat16: 1.2x faster decode (TPOT p50 40.0 ms vs 50.0 ms), perplexity +0.5 %" in best_sentence(
        definition(), trials
    )


def test_a_recipe_measured_before_reuses_its_run_and_queues_no_job(db):
    d = definition()
    spec = trial_spec(d.effective_base(), build_space(d).base_params())
    old = save_run(
        db,
        NewRun(
            status="done",
            spec=spec.model_dump(mode="json"),
            fingerprint=spec.fingerprint(),
            model="demo",
            engine="transformers",
            device="cpu",
            metrics={"tpot_ms": {"p50": 50.0}},
            quality={"perplexity": 20.0},
        ),
    )
    study = create(db)
    advance(db, "s1")
    trial0 = next(t for t in studies.list_trials(db, study.id) if t.number == 0)
    assert trial0.status == "complete" and trial0.reused and trial0.run_id == old and trial0.job_id is None
    assert all(j.name != "s1 · trial 0" for j in jobs.list_jobs(db))


def test_a_killed_worker_costs_no_trial_and_repeats_no_told_one(db):
    study = create(db, budget={"trials": 2})
    advance(db, "s1")
    [trial] = studies.list_trials(db, study.id)
    # worker w1 claims the job and dies before measuring: recovery puts the same job back in the queue
    jobs.claim(db, "w1", ["cpu"])
    jobs.mark_started(db, trial.job_id, "w1")
    assert [r.action for r in jobs.recover_stale(db, stale_after_s=60, dead_worker_ids=["w1"])] == ["requeued"]
    advance(db, "s1")
    assert [(t.number, t.job_id, t.status) for t in studies.list_trials(db, study.id)] == [(0, trial.job_id, "pending")]
    # worker w2 dies while measuring: the job fails "worker lost", and the study queues it once more
    jobs.claim(db, "w2", ["cpu"])
    jobs.mark_started(db, trial.job_id, "w2")
    jobs.progress(db, trial.job_id, phase="measuring", fraction=0.5, measuring_started=True)
    assert [r.action for r in jobs.recover_stale(db, stale_after_s=60, dead_worker_ids=["w2"])] == ["failed"]
    lines = advance(db, "s1").lines
    [again] = studies.list_trials(db, study.id)
    assert again.status == "pending" and again.job_id != trial.job_id and again.attempts == 2
    assert any("lost with its worker, queued again" in line for line in lines)
    run_job(db, again.job_id, 50.0, 20.0, worker="w3")
    # Optuna was told, but the caller died before recording it: the next advance records it, no second tell
    ostudy = sampling.load(db.url, study.optuna_name, definition())
    assert sampling.tell(ostudy, db.url, 0, "complete", [50.0], {"ppl_increase": -1.0})
    advance(db, "s1")
    advance(db, "s1")
    trials = studies.list_trials(db, study.id)
    assert trials[0].status == "complete" and trials[0].run_id is not None
    assert not sampling.tell(ostudy, db.url, 0, "complete", [1.0])  # already finished: told once
    assert len(trials) == 2 and trials[1].status == "pending"  # the next trial, not a repeat


def test_an_asked_trial_nobody_recorded_is_failed_and_a_repeated_recipe_is_a_duplicate(db):
    study = create(db, budget={"trials": 2})
    advance(db, "s1")
    ostudy = sampling.load(db.url, study.optuna_name, definition())
    orphan = ostudy.ask()  # a caller that died between ask and recording its trial
    ostudy.enqueue_trial({"dtype": "auto", "quantization": "none"})  # the base recipe once more
    lines = advance(db, "s1").lines
    assert any(f"trial {orphan.number} was asked but never queued" in line for line in lines)
    assert _optuna_states(db, study)[orphan.number] == "FAIL"
    run_job(db, _pending(db, study.id)[0].job_id, 50.0, 20.0)
    advance(db, "s1")
    dup = [t for t in studies.list_trials(db, study.id) if t.status == "duplicate"]
    assert [t.reason for t in dup] == ["same recipe as trial 0"]


def test_pause_holds_new_trials_and_stop_cancels_the_one_in_flight(db):
    study = create(db)
    advance(db, "s1")
    _, line = change(db, study, "pause", by="test")
    assert line == "study s1 paused"
    run_job(db, _pending(db, study.id)[0].job_id, 50.0, 20.0)
    advance(db, "s1")
    assert [t.status for t in studies.list_trials(db, study.id)] == ["complete"]  # told, nothing new asked
    change(db, study, "resume")
    advance(db, "s1")
    [pending] = _pending(db, study.id)
    _, line = change(db, study, "stop", by="test")
    assert line == "study s1 stopped; 1 job(s) in flight cancelled"
    assert jobs.get_job(db, pending.job_id).status == "cancelled"
    assert advance_all(db)  # a stopped study with a trial in flight is still settled
    stopped = studies.list_trials(db, study.id)[-1]
    assert stopped.status == "failed" and "cancelled" in stopped.reason
    assert advance_all(db) == [] and studies.active_study_ids(db) == []


def _fake_predictor(db, base):
    """The estimator's part: bfloat16 predicted fastest, int8 next; int8 with bfloat16 does not fit."""

    def predict(spec):
        r = spec.recipe
        tpot = {"bfloat16": 30.0}.get(r.dtype, 45.0) - (10.0 if r.quantization != "none" else 0.0)
        fits = r.dtype != "float32" or r.quantization == "none"
        return {"tpot_ms": tpot, "ttft_ms": 2 * tpot, "fits": fits, "memory_gb": 99.0, "usable_gb": 10.0}

    return predict


def test_the_estimator_orders_the_first_trials_and_prunes_what_does_not_fit(db, monkeypatch):
    import engine.optimize.driver as driver

    monkeypatch.setattr(driver, "predictor", _fake_predictor)
    study = create(db, sampler="tpe", budget={"trials": 9})  # 3 startup trials: the base, then 2 picks
    advance(db, "s1")
    ostudy = sampling.load(db.url, study.optuna_name, definition())
    waiting = [t.system_attrs["fixed_params"] for t in ostudy.get_trials(deepcopy=False) if t.state.name == "WAITING"]
    # the one-knob changes of the base, fastest predicted first: bfloat16 (30 ms), then int8 (35 ms); float32 is 45
    assert waiting == [
        {"dtype": "bfloat16", "quantization": "none"},
        {"dtype": "auto", "quantization": "torch_dynamic_int8"},
    ]
    study, trials = _drive(db, study)
    unfit = [t for t in trials if t.params == {"dtype": "float32", "quantization": "torch_dynamic_int8"}]
    assert unfit and all(t.status == "pruned" for t in unfit)
    assert unfit[0].reason == "does not fit: needs 99.0 GB per device, 10.0 GB usable"
    measured = [t for t in trials if t.status == "complete"]
    assert all(t.predicted["tpot_ms"] for t in measured)  # the prediction sits beside the measurement


def test_a_pareto_study_of_speed_against_accuracy(db):
    study = create(
        db, objectives=["tpot_p50", "ppl_increase_pct"], sampler="nsga2", constraints={}, budget={"trials": 3}
    )
    study, trials = _drive(db, study)
    assert study.status == "done"
    measured = [t for t in trials if t.status == "complete"]
    assert len(measured) == 3 and all(len(t.values) == 2 and t.feasible for t in measured)
    base = next(t for t in measured if t.number == 0)
    assert base.values == [50.0, 0.0]
