"""The SLA finder section (ui/sla_view.py) in an AppTest script that calls render_sla_section:
stored searches with their answers and load-curve links; the form refuses bad input and queues a real first probe."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from storage import jobs
from storage import sla as store

SCRIPT = """
from storage import open_database
from engine.settings import database_url
from ui.sla_view import render_sla_section

render_sla_section(open_database(database_url()))
"""


def _open(db_url, monkeypatch) -> AppTest:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    return AppTest.from_string(SCRIPT, default_timeout=30).run()


def test_a_stored_search_shows_its_answer_probes_and_load_curve_link(db, db_url, monkeypatch) -> None:
    definition = {"base": {}, "slo": [{"metric": "ttft_ms", "percentile": "p99", "limit_ms": 200.0}], "goodput": 0.99}
    search = store.create(db, "chat-demo", definition)
    probes = [
        {"load": 1.0, "status": "passed", "run_id": 7, "values": {"goodput_fraction": 1.0}, "goodput_ci": [0.9, 1.0]},
        {"load": 2.0, "status": "failed", "run_id": 8, "reasons": ["TTFT p99 412 ms > 200 ms"]},
    ]
    answer = {"text": "1 req/s (between 1 and 2) at 99 % goodput", "probes": 2, "why": "bracket within the resolution"}
    store.save(db, search, probes, status="done", answer=answer)
    at = _open(db_url, monkeypatch)
    assert not at.exception, at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "[load curve](loadcurve?sweep=sla%3Achat-demo)" in text
    assert "**1 req/s (between 1 and 2) at 99 % goodput** · TTFT p99 ≤ 200 ms at 99 % goodput" in text
    table = at.dataframe[0].value
    assert table["verdict"].tolist() == ["passed", "failed"] and table["goodput 95 % CI"][0] == "90.0% – 100.0%"
    assert table["why"][1] == "TTFT p99 412 ms > 200 ms"


def test_the_form_refuses_a_bad_slo_and_queues_the_first_probe_of_a_good_one(db, db_url, monkeypatch) -> None:
    at = _open(db_url, monkeypatch)
    assert "No SLA searches yet." in [i.value for i in at.info]
    at.selectbox[0].set_value("transformers")
    at.selectbox[1].set_value("custom")
    at.text_input[2].set_value("ttft_p99=fast")
    at.text_input[3].set_value("form-search")
    at.button[0].click().run()
    assert any("Not started" in e.value and "'fast' is not a number of ms" in e.value for e in at.error)
    assert store.list_searches(db) == [] and jobs.list_jobs(db) == []
    at.text_input[2].set_value("ttft_p99=300")
    at.button[0].click().run()
    assert not at.exception, at.exception
    found = store.find(db, "form-search")
    assert found is not None and found.probes[0]["status"] == "queued"
    job = jobs.get_job(db, found.probes[0]["job_id"])
    assert job.sweep == "sla:form-search" and job.spec["workload"]["rate"] == 1.0
    assert job.spec["workload"]["slo_ttft_ms"] == 300.0


def test_a_typed_search_name_survives_a_rerun_a_second_later(db, db_url, monkeypatch) -> None:
    import itertools
    import time

    ticks = itertools.count()
    monkeypatch.setattr(time, "strftime", lambda _fmt, *_a: f"20261201-{next(ticks):06d}")  # a new second each call
    at = _open(db_url, monkeypatch)
    at.selectbox[0].set_value("transformers")
    at.text_input[3].set_value("my-search")
    # the click's rerun comes a second later: a default that changed with it made a new widget, and the
    # typed name was thrown away (the search got the new default name)
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert store.find(db, "my-search") is not None
