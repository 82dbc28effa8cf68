"""Load curves (pure): offered load from a run's load stats or spec, the knee rule, the figures' marks."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from engine.report.loadcurve import build_curve, find_knee, load_point, slo_limits, table
from engine.report.loadfigures import latency_figure, pareto_figure


def _run(run_id, offered, rps, ttft, arrival="poisson", status="done", goodput=None, slo=None, per_gpu=None):
    load = {"arrival": arrival}
    workload = {"arrival": arrival}
    if arrival == "concurrency":
        load["max_concurrency"] = offered
    elif arrival != "max":
        workload["rate"] = offered  # only in the spec: the load stats of older runs lack configured_rate
    metrics = {
        "ttft_ms": {"p50": ttft, "p99": ttft * 2, "ci": {"p50": [ttft * 0.9, ttft * 1.1], "p99": None}},
        "tpot_ms": {"p50": 10.0, "p99": 12.0, "ci": {}},
        "requests_per_s": rps,
        "output_tokens_per_s": rps * 16,
        "output_tokens_per_s_per_gpu": per_gpu,
        "tokens_per_s_per_user": 100.0 / (1 + rps),
        "goodput_fraction": goodput,
        "slo": slo,
        "load": load,
    }
    spec = {"workload": workload}
    return SimpleNamespace(id=run_id, name=None, status=status, spec=spec, metrics=metrics, error=None)


def test_offered_load_comes_from_the_load_stats_or_the_spec() -> None:
    assert load_point(_run(1, 2.0, 2.0, 50)).offered == 2.0
    assert load_point(_run(2, 8, 5.0, 50, arrival="concurrency")).offered == 8.0
    assert load_point(_run(3, None, 9.0, 50, arrival="max")).offered == math.inf
    batch = _run(4, None, 1.0, 50, arrival="batch")
    assert load_point(batch).offered is None and not load_point(batch).ok


def test_the_knee_is_the_last_point_before_throughput_stops_tracking_the_offered_load() -> None:
    runs = [_run(i, x, min(x, 2.5), 50) for i, x in enumerate((1.0, 2.0, 4.0, 8.0))]
    curve = build_curve("s", list(reversed(runs)))
    assert [p.offered for p in curve.points] == [1.0, 2.0, 4.0, 8.0] and curve.axis == "rate"
    assert curve.knee.offered == 2.0
    assert curve.knee_words.startswith("knee at 2: above it throughput gained +25% for +100% load at 4")


def test_the_knee_from_a_steep_latency_rise_and_no_knee_on_a_flat_curve() -> None:
    runs = [_run(i, x, x, ttft) for i, (x, ttft) in enumerate(((1.0, 40), (2.0, 60), (3.0, 150)))]
    knee, words = find_knee(build_curve("s", runs).points)
    assert knee.offered == 2.0 and "TTFT p50 rose 3.8x" in words
    knee, words = find_knee(build_curve("s", runs[:2]).points)
    assert knee is None and words == "no knee: still flat at the highest load (2)"
    assert find_knee(build_curve("s", runs[:1]).points)[0] is None


def test_failed_and_unknown_loads_stay_off_the_curve_but_in_the_table() -> None:
    runs = [_run(1, 1.0, 1.0, 40), _run(2, 2.0, 2.0, 40, status="failed"), _run(3, None, 5.0, 40, arrival="max")]
    curve = build_curve("s", runs)
    assert [p.run_id for p in curve.done()] == [1, 3]
    rows = table(curve)
    assert [r["offered"] for r in rows] == [1.0, 2.0, "as fast as possible"]
    assert rows[1]["status"].startswith("failed")


def test_the_latency_figure_has_error_bars_the_slo_the_goodput_the_knee_and_the_answer() -> None:
    slo = {"ttft_ms": 120.0, "tpot_ms": None, "e2el_ms": None}
    runs = [_run(i, x, min(x, 2.5), 50, goodput=1.0 if x < 4 else 0.2, slo=slo) for i, x in enumerate((1.0, 2.0, 4.0))]
    curve = build_curve("s", runs)
    assert slo_limits(curve) == {"ttft_ms": 120.0}
    answer = {"low": 2.0, "high": 4.0, "text": "2 req/s (between 2 and 4)", "slo": []}
    fig = latency_figure(curve, "ttft_ms", "offered", answer).to_dict()
    p50, p99, goodput = fig["data"]
    assert p50["x"] == [1.0, 2.0, 4.0] and p50["error_y"]["array"][0] == pytest.approx(5.0)  # 50 ms, up to 55
    assert p99["error_y"]["array"] == [0.0, 0.0, 0.0]  # no interval stored: no bar
    assert goodput["yaxis"] == "y2" and goodput["y"] == [1.0, 1.0, 0.2]
    kinds = [(s["type"], s.get("x0"), s.get("y0")) for s in fig["layout"]["shapes"]]
    assert ("line", 0, 120.0) in kinds  # the SLO (a horizontal line spans the plot: x0 = 0 in paper units)
    assert ("line", 2.0, 0) in kinds  # the knee
    assert ("rect", 2.0, 0) in kinds  # the SLA bracket
    achieved = latency_figure(curve, "tpot_ms", "achieved").to_dict()
    assert achieved["data"][0]["x"] == [1.0, 2.0, 2.5] and achieved["layout"]["xaxis"]["title"]["text"].startswith(
        "achieved throughput"
    )


def test_the_per_user_view_uses_per_gpu_throughput_when_runs_have_it() -> None:
    runs = [_run(i, x, x, 40, per_gpu=x * 8) for i, x in enumerate((1.0, 2.0))]
    fig = pareto_figure(build_curve("s", runs)).to_dict()
    assert fig["data"][0]["x"] == [8.0, 16.0] and fig["data"][0]["text"] == ["1", "2"]
    assert fig["layout"]["xaxis"]["title"]["text"].startswith("output tokens/s per GPU")
    cpu = pareto_figure(build_curve("s", [_run(1, 1.0, 1.0, 40)])).to_dict()
    assert cpu["data"][0]["x"] == [16.0] and "one device" in cpu["layout"]["xaxis"]["title"]["text"]


def _stopped_curve():
    runs = [_run(i, x, min(x, 2.5), 50) for i, x in enumerate((1.0, 2.0, 4.0))]
    verdicts = {
        0: {"saturated": False, "reason": "kept up"},
        1: {"saturated": None, "reason": "cannot tell"},
        2: {"saturated": True, "reason": "in-flight requests grew 1.5/s (95 % CI 1–2)"},
    }
    stop = {
        "stopped_because": "saturated at 4 req/s: in-flight requests grew 1.5/s (95 % CI 1–2)",
        "load": 4.0,
        "reason": "not run: saturated at 4 req/s (run 2): in-flight requests grew 1.5/s (95 % CI 1–2)",
        "not_run": [{"point": "rate 8/s", "load": 8.0, "job_id": 7}, {"point": "max rate", "load": None, "job_id": 8}],
    }
    return build_curve("s", runs, verdicts, {2: stop, 1: {"no": "stop"}})


def test_a_sweep_that_stopped_says_where_why_and_what_it_did_not_run() -> None:
    from engine.report.loadcurve import not_run_rows

    curve = _stopped_curve()
    assert [p.saturated for p in curve.points] == [False, None, True]
    (stop,) = curve.stops  # the record that is not a stop is left out
    assert stop.run_id == 2 and stop.load == 4.0 and stop.not_run_words == "rate 8/s, max rate"
    rows = table(curve)
    assert [r["saturated"] for r in rows] == ["no", "cannot tell", "saturated"]
    assert [r["stopped"] for r in rows] == ["", "", "◀ stopped"]
    assert [r["point"] for r in not_run_rows(curve)] == ["rate 8/s", "max rate"]
    assert not_run_rows(curve)[0]["reason"].startswith("not run: saturated at 4 req/s (run 2)")
    assert build_curve("s", [_run(1, 1.0, 1.0, 50)]).points[0].saturation is None  # stored before verdicts


def test_the_latency_figure_marks_saturated_runs_and_the_stop() -> None:
    fig = latency_figure(_stopped_curve(), "ttft_ms", "offered").to_dict()
    crosses = next(t for t in fig["data"] if t["name"] == "saturated")
    assert list(crosses["x"]) == [4.0] and crosses["customdata"][0][0] == 2
    line = [a for a in fig["layout"]["annotations"] if a["text"].startswith("stopped: saturated")]
    assert line and line[0]["text"] == "stopped: saturated (not run: rate 8/s, max rate)"
    achieved = latency_figure(_stopped_curve(), "ttft_ms", "achieved").to_dict()
    assert any(s.get("x0") == 2.5 for s in achieved["layout"]["shapes"])  # at the stopped run's throughput
