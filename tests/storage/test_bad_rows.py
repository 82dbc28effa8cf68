"""Strict JSON on the way in; a row that cannot be read on the way out is skipped with a warning.

Rows with ``Infinity``/``NaN`` or broken JSON are written by raw SQL, as an older version
(or a hand edit) left them, and must never take a listing, a page or an export down.
"""

from __future__ import annotations

import logging
import math

import pytest
from sqlalchemy import text

from storage import StorageError, jobs
from storage.frames import runs_frame
from storage.runs import NewRun, get_run, list_runs, save_run
from tests.storage.test_runs import new_run

BAD_TEXTS = {
    "infinity": ("metrics_json", '{"ttft_ms": {"p50": Infinity}, "completed": 1}'),
    "nan": ("spec_json", '{"workload": {"slo_tpot_ms": NaN}}'),
    "garbage": ("quality_json", "{not json"),
}


def _raw_bad_run(db, column: str, value: str) -> int:
    good = save_run(db, new_run())
    with db.engine.begin() as conn:
        conn.execute(text(f"UPDATE runs SET {column} = :v WHERE id = :id"), {"v": value, "id": good})
    return good


def test_non_finite_numbers_are_stored_as_null(db):
    run_id = save_run(
        db,
        new_run(
            metrics={"ttft_ms": {"p50": math.inf}, "x": [math.nan, 1.0]},
            spec={"workload": {"slo_tpot_ms": math.inf}},
            provenance={"ratio": -math.inf},
            quality={"perplexity": math.nan},
        ),
    )
    with db.engine.connect() as conn:
        raw = conn.execute(
            text("SELECT metrics_json, spec_json, provenance_json, quality_json FROM runs WHERE id = :i"), {"i": run_id}
        ).one()
    assert not any(word in "".join(raw) for word in ("Infinity", "NaN"))
    run = get_run(db, run_id)
    assert run.metrics == {"ttft_ms": {"p50": None}, "x": [None, 1.0]}
    assert run.spec["workload"]["slo_tpot_ms"] is None and run.quality == {"perplexity": None}


@pytest.mark.parametrize("kind", sorted(BAD_TEXTS))
def test_a_bad_run_row_is_skipped_with_a_warning(db, caplog, kind):
    keep = save_run(db, new_run())
    bad = _raw_bad_run(db, *BAD_TEXTS[kind])
    listed_too = kind == "nan"  # the listing does not read the spec: the row lists, its detail is skipped
    with caplog.at_level(logging.WARNING, logger="storage"):
        assert [r.id for r in list_runs(db)] == ([bad, keep] if listed_too else [keep])
        assert get_run(db, bad) is None and get_run(db, keep) is not None
        frame = runs_frame(db)
    # tables read the headline columns written with the run, not its JSON: the run still lists there
    assert frame["run_id"].tolist() == [bad, keep]
    assert f"skipping run {bad}" in caplog.text


def test_a_bad_job_row_is_skipped_with_a_warning(db, caplog):
    from engine.spec import parse_job_spec

    spec = parse_job_spec({"model": {"source": "demo"}})
    keep, bad = jobs.submit_many(db, [spec, spec])
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET spec_json = :v WHERE id = :id"), {"v": '{"x": Infinity}', "id": bad})
    with caplog.at_level(logging.WARNING, logger="storage"):
        assert [j.id for j in jobs.list_jobs(db)] == [keep]
        assert jobs.get_job(db, bad) is None
    assert f"skipping job {bad}" in caplog.text


def test_database_errors_leave_storage_as_storage_errors(db):
    with pytest.raises(StorageError, match="database error"):
        save_run(db, NewRun(status=None, spec={}, fingerprint="f", model="m", engine="e", device="cpu"))  # NOT NULL
    with db.engine.begin() as conn:
        conn.execute(text("DROP TABLE workers"))
    with pytest.raises(StorageError, match="no such table"):
        jobs.list_workers(db)
