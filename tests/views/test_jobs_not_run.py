"""Jobs page (AppTest): a load sweep that stops at saturation says so while its points wait, and a point
its sweep stopped before says why it was not run (not as an error)."""

from __future__ import annotations

from engine.spec import parse_job_spec
from storage import jobs
from tests.seed_runs import open_page


def _spec(rate: float):
    return parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, "arrival": "poisson", "rate": rate},
        }
    )


def test_waiting_and_not_run_points_of_a_sweep_that_stops_at_saturation(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    low, high = jobs.submit_many(db, [_spec(2), _spec(8)], sweep="s", note=jobs.STOPS_AT_SATURATION)
    reason = "not run: saturated at 2 req/s (run 5): in-flight requests grew 2.1/s (95 % CI 1.6–2.6)"
    assert jobs.not_run(db, [high], reason) == [high]
    assert jobs.not_run(db, [high], "again") == []  # only queued jobs end
    at = open_page("views/jobs.py")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "waiting for a worker that serves cpu" in captions and f" · {jobs.STOPS_AT_SATURATION}" in captions
    assert "re-queued" not in captions
    assert [i.value for i in at.info if i.value.startswith("not run:")] == [reason]
    assert not [e.value for e in at.error if "not run" in e.value]
    assert jobs.get_job(db, high).status == "cancelled" and jobs.get_job(db, low).status == "queued"
