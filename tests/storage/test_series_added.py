"""A side record added to a stored run after it ran (what its sweep decided), and one kind read for many runs."""

from __future__ import annotations

import math

from storage.runs import NewRun, save_run
from storage.series import add_series, get_series, series_by_run


def _run(**series) -> NewRun:
    return NewRun(status="done", spec={}, fingerprint="f", model="demo", engine="openai", device="cpu", series=series)


def test_a_record_added_later_reads_back_and_many_runs_read_at_once(db):
    first = save_run(db, _run(saturation={"saturated": False}))
    second = save_run(db, _run(saturation={"saturated": True}))
    bare = save_run(db, _run())
    add_series(db, second, "sweep_stop", {"stopped_because": "saturated at 8 req/s", "load": math.inf})
    assert get_series(db, second, "sweep_stop") == {"stopped_because": "saturated at 8 req/s", "load": None}
    assert series_by_run(db, [first, second, bare], "saturation") == {
        first: {"saturated": False},
        second: {"saturated": True},
    }
    assert series_by_run(db, [first, bare], "sweep_stop") == {} and series_by_run(db, [], "saturation") == {}
