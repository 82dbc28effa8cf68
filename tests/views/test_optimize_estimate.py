"""Optimize shows how long a study will take before "Create study" (issue 34, item 9): the base job's estimate
(engine/whatif/job.py) times the trials."""

from __future__ import annotations

import sys
from pathlib import Path

from seed_runs import open_page

from engine.whatif.job import JobEstimate
from ui.launch_estimate import study_words

sys.path.append(str(Path(__file__).resolve().parents[1] / "engine" / "whatif"))
from whatif_seed import save_cpu_measurement


def test_the_study_estimate_in_words():
    per_trial = JobEstimate(seconds=240.0)
    assert study_words(per_trial, 10).startswith("about 40 min for 10 trials (each about 4 min, as long as the base")
    assert "the budget stops it at 30 min" in study_words(per_trial, 10, max_minutes=30)
    assert study_words(JobEstimate(), 5).startswith("time unknown for 5 trials")


def test_the_estimate_is_shown_before_create_and_follows_the_trials(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    save_cpu_measurement(db)
    at = open_page("views/optimize.py")
    at.text_input(key="study_name").input("first").run()
    assert not at.exception
    [line] = [i.value for i in at.info if i.value.startswith("Estimate:")]
    assert "for 10 trials (each about" in line
    at.number_input(key="trials").set_value(3).run()
    assert any(i.value.startswith("Estimate:") and "for 3 trials" in i.value for i in at.info)
