"""The Run page of a trace run whose schedule was not kept (issue 34, item 4): the headline is latency from the
due time, the send lag and send minus due never contradict each other, and large values read in seconds."""

from __future__ import annotations

import re

from schedule_seed import make_serial_trace_run
from seed_runs import open_page

from engine.measure.schedule import RULE, duration_text, schedule_of, span_text


def test_durations_read_in_units_people_use() -> None:
    assert [duration_text(v) for v in (0.26, 1.5, 58.5, 153.2, 1360, 69_066.98, 1_234_567)] == [
        "0.26 ms", "1.50 ms", "58.5 ms", "153 ms", "1.36 s", "69 s", "1,235 s",
    ]  # fmt: skip
    assert span_text(70_100, 73_000) == "70–73 s" and span_text(8.1, 9.3) == "8.10–9.30 ms"


def test_the_schedule_rule() -> None:
    due = [i * 100_000_000 for i in range(20)]  # every 100 ms
    kept = schedule_of(due, [d + 9_000_000 for d in due])  # 9 ms late: under 10 % of the gap
    late = schedule_of(due, [d + 11_000_000 for d in due])  # 11 ms late: over it
    assert kept["kept"] and not late["kept"] and kept["limit_ms"] == 10.0 and kept["gap_ms_p50"] == 100.0
    burst = schedule_of([0] * 10, [500_000] * 10)  # everything due at once: 1 ms floor
    assert burst["kept"] and burst["limit_ms"] == 1.0


def test_a_trace_run_that_fell_behind_leads_with_latency_from_the_due_time(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    run = make_serial_trace_run(db)
    at = open_page("views/run.py", run=str(run))
    assert not at.exception
    cards = {m.label: (m.value, m.proto.delta) for m in at.metric}
    assert cards["TTFT p50 from the due time"][0] == "32 s"
    assert cards["TTFT p50 from the due time"][1].startswith("from the send: 1.36 s · 95 % CI 22–42 s")
    warning = " ".join(w.value for w in at.warning)
    assert "The schedule was not kept: requests went out 54 s after their due time (p90)" in warning
    assert "more than 25.0 ms (10 % of the median gap between due times, 250 ms)" in warning and RULE in warning
    assert "The transformers engine serves one request at a time" in warning
    table = at.dataframe[0].value
    assert any(str(m).startswith("TTFT from the due time") for m in table["metric"])
    bodies = "\n".join(m.value for m in at.markdown)
    # the client's own lag and the schedule's lateness, named apart, by one function, in the same units
    assert "the client's own send lag (send minus the moment it could go): p50 0.26 ms" in bodies
    assert "send minus due (the schedule): p50 30 s, p99 60 s" in bodies
    assert "requests waited for the engine, not for the client" in bodies
    assert "send minus due: p50 30 s, p99 60 s, max 60 s over 40 requests" in bodies  # the Traffic section
    assert not re.search(r"\d,\d{3}\.\d{2} ms", bodies + warning)  # never 69,066.98 ms
    assert (
        "trace mooncake.jsonl ×10" in bodies and "?→" not in bodies
    )  # the recipe line names the trace, not "?→8 tokens"


def test_a_kept_schedule_keeps_the_usual_card(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    run = make_serial_trace_run(db, gap_ms=2500.0)  # the engine keeps up: every request sent on time
    at = open_page("views/run.py", run=str(run))
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "TTFT p50" in labels and "TTFT p50 from the due time" not in labels
    assert not any("schedule was not kept" in w.value for w in at.warning)


def test_the_result_text_says_the_schedule_and_leads_with_the_due_time(db):
    from engine.report.results import render_table, result_object
    from storage.runs import get_run

    obj = result_object(get_run(db, make_serial_trace_run(db)))
    assert obj["schedule"]["kept"] is False and obj["schedule"]["gap_ms_p50"] == 250.0
    text = render_table(obj)
    assert "schedule not kept: requests went out 54 s after their due time (p90)" in text
    assert "headline                          TTFT p50 from the due time 32 s (from the send: 1.36 s" in text
    assert "TTFT from the due time [ms]" in text
