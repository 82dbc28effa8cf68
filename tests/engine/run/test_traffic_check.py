"""Every traffic input checked in one place before anything loads or queues (issue 33): the whole file, cached by
its content; traces scaled to the model at hand; the schedule said up front and refused beyond an hour."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.run.sources import PlanContext
from engine.run.sources.check import check_traffic
from engine.run.sources.trace import TraceSource
from engine.spec import SpecError, parse_job_spec


def _mooncake(tmp_path: Path, rows: list[dict], name: str = "trace.jsonl") -> str:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def _rows(n: int, gap_ms: int = 100, tokens: int = 2000, out: int = 40) -> list[dict]:
    return [
        {"timestamp": gap_ms * i, "input_length": tokens, "output_length": out, "hash_ids": [1, 2, 3, 10 + i]}
        for i in range(n)
    ]


def _spec(trace: str, **traffic: object) -> object:
    workload = {"traffic": {"source": "trace", "trace": trace, **traffic}}
    return parse_job_spec({"model": {"source": "synthetic:smollm2-135m"}, "workload": workload})


def _cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err.strip()


def test_a_bad_row_after_line_100_is_found_before_loading(tmp_path) -> None:
    rows = [json.dumps(r) for r in _rows(150)]
    rows[120] = '{"timestamp": 1, "input_length": 5'
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(SpecError, match="line 121"):
        check_traffic(_spec(str(path)))


def test_timestamps_going_backwards_late_in_the_file_are_refused(tmp_path) -> None:
    rows = _rows(200)
    rows[180]["timestamp"] = 5
    with pytest.raises(SpecError, match=r"line 181.*must not decrease"):
        check_traffic(_spec(_mooncake(tmp_path, rows)))


@pytest.mark.parametrize(("start", "duration"), [(100.0, 10.0), (1e9, 1.0), (3600.0, 60.0)])
def test_a_window_with_no_rows_is_one_line(tmp_path, start, duration) -> None:
    with pytest.raises(SpecError, match="no row is due between"):
        check_traffic(_spec(_mooncake(tmp_path, _rows(20)), trace_start_s=start, trace_duration_s=duration))


def test_a_schedule_longer_than_an_hour_names_the_options_that_shorten_it(tmp_path) -> None:
    rows = _rows(3)
    rows[2]["timestamp"] = 2 * 3600 * 1000  # an hour-long gap (or milliseconds read as seconds)
    with pytest.raises(SpecError, match=r"2\.0 h .*longest gap.*--trace-window.*--time-scale 3"):
        check_traffic(_spec(_mooncake(tmp_path, rows)))
    assert check_traffic(_spec(_mooncake(tmp_path, rows), time_scale=3.0)).facts["duration_s"] == 2400.0


def test_a_requests_cap_that_shortens_the_window_says_so(tmp_path) -> None:
    trace = _mooncake(tmp_path, _rows(40, gap_ms=1000))
    spec = parse_job_spec(
        {"model": {"source": "synthetic:smollm2-135m"},
         "workload": {"traffic": {"source": "trace", "trace": trace}, "requests": 10}}
    )  # fmt: skip
    check = check_traffic(spec)
    assert check.facts["requests"] == 10 and check.facts["duration_s"] == 9.0
    assert "10 of the window's 40 rows" in check.words(spec.workload.traffic)
    plan = TraceSource().plan(spec.workload.traffic, spec.workload, PlanContext(None, 1000, None))
    assert (
        plan.facts["capped"].startswith("10 of the window's 40 rows replayed")
        and "9.0 s of its 39.0 s" in (plan.facts["capped"])
    )


def test_length_scale_keeps_the_shape_and_the_shared_blocks(tmp_path) -> None:
    spec = _spec(_mooncake(tmp_path, _rows(4)), input_scale=0.1, output_scale=0.1)
    plan = TraceSource().plan(spec.workload.traffic, spec.workload, PlanContext(None, 1000, None))
    assert [len(p.request.prompt) for p in plan.measured] == [200] * 4
    assert [p.output_tokens for p in plan.measured] == [4] * 4
    firsts = [p.request.prompt[:153] for p in plan.measured]  # three shared blocks of 51 tokens
    assert all(f == firsts[0] for f in firsts) and plan.measured[0].request.prompt != plan.measured[1].request.prompt
    assert plan.facts["shared_blocks"] == 0.5625  # as unscaled: 9 of 16 hash blocks seen before
    assert plan.facts["as_recorded"] == {
        "rows": 4,
        "prompt_median": 2000,
        "output_median": 40,
    }  # the preview's "before"
    from engine.report.traffic_figures import facts_lines

    assert "as recorded (before scaling and limits): 4 rows, prompts median 2,000" in " ".join(facts_lines(plan.facts))


def test_prompt_limits_filter_a_trace_after_scaling_and_say_how_many(tmp_path) -> None:
    rows = _rows(6)
    for i, r in enumerate(rows):
        r["input_length"] = 1000 * (i + 1)
        r["hash_ids"] = list(range(100 * i, 100 * i + -(-r["input_length"] // 512)))
    spec = _spec(_mooncake(tmp_path, rows), max_prompt_tokens=3000)
    check = check_traffic(spec)
    assert check.facts["requests"] == 3 and check.facts["filtered"] == 3
    with pytest.raises(SpecError, match="every one of its 6 rows is outside the prompt limits"):
        check_traffic(_spec(_mooncake(tmp_path, rows, "b.jsonl"), min_prompt_tokens=100_000))


def test_a_check_is_cached_by_content_and_read_again_when_the_file_changes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DATA_DIR", str(tmp_path / "data"))
    from engine.settings import get_settings

    get_settings.cache_clear()
    trace = _mooncake(tmp_path, _rows(30_000, gap_ms=10))
    try:
        t0 = time.perf_counter()
        first = check_traffic(_spec(trace))
        cold = time.perf_counter() - t0
        again = check_traffic(_spec(trace))
        assert not first.cached and again.cached and again.facts == first.facts
        assert cold > 0  # the figures are in benchmarks/hostile_inputs.py, never a timed assertion
        Path(trace).write_text(Path(trace).read_text().replace('"output_length": 40', '"output_length": 41', 1))
        assert not check_traffic(_spec(trace)).cached  # a file changed on disk is read again
    finally:
        get_settings.cache_clear()


def test_run_and_submit_refuse_the_same_trace_in_one_line_and_store_nothing(tmp_path, db_url, capsys) -> None:
    from storage import open_database
    from storage.jobs import list_jobs
    from storage.runs import count_runs

    rows = _rows(200)
    rows[150]["timestamp"] = 3
    trace = _mooncake(tmp_path, rows)
    for verb in ("run", "submit"):
        code, err = _cli(capsys, verb, "--db", db_url, "--model", "synthetic:smollm2-135m", "--trace", trace)
        assert code == 2 and len(err.splitlines()) == 1 and "line 151" in err, (verb, err)
    db = open_database(db_url)
    assert count_runs(db) == 0 and list_jobs(db) == []


def test_submit_says_the_schedule_up_front(tmp_path, db_url, capsys) -> None:
    trace = _mooncake(tmp_path, _rows(20, gap_ms=500))
    code, err = _cli(capsys, "submit", "--db", db_url, "--model", "synthetic:smollm2-135m", "--trace", trace)
    assert code == 0 and "trace replay trace.jsonl (mooncake): 20 requests over 9.5 s" in err
