"""AppTest smoke tests of the Runs page: the list, ?run=ID, and bad links."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def app(demo_run, monkeypatch):
    db, _run_id = demo_run
    monkeypatch.setenv("LATENCYLAB_DB_URL", db.url)
    return AppTest.from_file(APP, default_timeout=30)


def text_of(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [w.value for w in at.warning] + [e.value for e in at.error]
    parts += [s.value for s in at.subheader] + [t.value for t in at.title] + [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


@pytest.mark.slow
def test_lists_runs(app, demo_run):
    at = app.run()
    assert not at.exception
    assert "Runs" in text_of(at)
    frame = at.dataframe[0].value
    assert demo_run[1] in set(frame["link"].str.extract(r"(\d+)$")[0].astype(int))


@pytest.mark.slow
def test_opens_one_run(app, demo_run):
    app.query_params["run"] = str(demo_run[1])
    at = app.run()
    assert not at.exception
    assert "demo fixture" in text_of(at)
    labels = [m.label for m in at.metric]
    assert "TTFT p50" in labels and "TPOT p50" in labels


@pytest.mark.slow
@pytest.mark.parametrize(
    ("value", "fragment"),
    [("abc", "not a valid run id"), ("999999", "There is no run 999999"), ("-4", "not a valid run id")],
)
def test_bad_links_are_friendly(app, value, fragment):
    app.query_params["run"] = value
    at = app.run()
    assert not at.exception
    assert fragment in text_of(at)


def test_empty_database(monkeypatch, tmp_path):
    monkeypatch.setenv("LATENCYLAB_DB_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert "No runs yet" in text_of(at)


def test_failure_rate_and_reasons_in_the_list(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    flaky = make_run(db, name="flaky", failed_requests=3)
    fine = make_run(db, name="fine", seed=1)
    broken = make_run(db, name="broken", status="failed", error="out of memory while loading")
    mystery = make_run(db, name="mystery", status="failed")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    frame = at.dataframe[0].value
    frame["id"] = frame["link"].str.extract(r"(\d+)$")[0].astype(int)
    rows = frame.set_index("id")
    assert rows.loc[flaky, "error_rate"] == 0.5 and rows.loc[fine, "error_rate"] == 0.0
    assert rows.loc[broken, "reason"] == "out of memory while loading"
    assert rows.loc[mystery, "reason"] == "no reason recorded"
    assert rows.loc[fine, "reason"] == ""
    assert "None" not in set(rows["reason"].astype(str))


def test_noise_column(db, db_url, monkeypatch):
    from seed_runs import make_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    flag = {"flag": "contention", "kind": "machine", "detail": "load 3.4 on 2 cores"}
    noisy = make_run(db, name="noisy", extra_metrics={"noise_flags": [flag]})
    old = make_run(db, name="old", seed=1)  # stored before noise flags existed
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    frame = at.dataframe[0].value
    rows = frame.set_index(frame["link"].str.extract(r"(\d+)$")[0].astype(int))
    assert rows.loc[noisy, "noise"] == "load 3.4 on 2 cores"
    assert not isinstance(rows.loc[old, "noise"], str)  # blank: not recorded
