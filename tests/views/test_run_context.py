"""The Run page and the result text say when a run did not know its server's context (AppTest, a seeded run)."""

from __future__ import annotations

from seed_runs import make_run, open_page

from engine.backends.openai.served import UNKNOWN_NOTE


def test_a_run_against_a_server_of_unknown_context_says_so(db, db_url, monkeypatch):
    from engine.report.results import render_table, result_object
    from storage.runs import get_run

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    facts = {"context_length": None, "context_length_source": "unknown", "context_note": UNKNOWN_NOTE}
    unknown = make_run(db, provenance=facts)
    known = make_run(db, provenance={"context_length": 8192, "context_length_source": "server"})
    at = open_page("views/run.py", run=str(unknown))
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Context: the server's context length is unknown") for c in captions), captions
    assert "context                           the server's context length is unknown" in render_table(
        result_object(get_run(db, unknown))
    )
    at = open_page("views/run.py", run=str(known))
    assert not any(c.value.startswith("Context:") for c in at.caption)
    assert "context  " not in render_table(result_object(get_run(db, known)))
