"""Load curves page (AppTest, seeded sweep runs): the list of sweeps, one sweep's curves, an SLA search's answer."""

from __future__ import annotations

import json

from storage import sla as store
from tests.seed_runs import make_run, open_page

RATES = (1.0, 2.0, 4.0, 8.0)


def seed_sweep(db, sweep: str = "demo-rates", slo_ttft_ms: float = 150.0) -> list[int]:
    """A rate sweep whose TTFT and throughput saturate above 2 req/s (like a real server's)."""
    ids = []
    for i, rate in enumerate(RATES):
        served, ttft = min(rate, 2.5), 50 * (1 if rate <= 2 else rate)
        ids.append(
            make_run(
                db,
                name=f"rate {rate:g}/s",
                sweep=sweep,
                ttft_ms=ttft,
                tpot_ms=10 + rate,
                seed=i,
                n=12,
                workload={"arrival": "poisson", "rate": rate, "slo_ttft_ms": slo_ttft_ms},
                extra_metrics={
                    "requests_per_s": served,
                    "goodput_fraction": 1.0 if ttft * 1.1 < slo_ttft_ms else 0.0,  # the seeded TTFTs are +-10 %
                    "slo": {"ttft_ms": slo_ttft_ms, "tpot_ms": None, "e2el_ms": None},
                    "load": {"arrival": "poisson", "configured_rate": rate, "achieved_rate": rate * 0.97},
                },
            )
        )
    return ids


def _figures(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_without_a_sweep_the_page_lists_the_sweeps(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    seed_sweep(db, "nightly")
    at = open_page("views/loadcurve.py")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "[nightly](loadcurve?sweep=nightly)" in text and "4 runs (4 done)" in text


def test_a_sweep_shows_latency_against_load_with_its_slo_goodput_and_knee(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    ids = seed_sweep(db)
    at = open_page("views/loadcurve.py", sweep="demo-rates")
    assert not at.exception, at.exception
    figures = _figures(at)
    assert len(figures) == 5  # TTFT and TPOT against offered and against achieved, and the per-user view
    ttft = figures[0]
    names = [t["name"] for t in ttft["data"]]
    assert names == ["TTFT p50", "TTFT p99", "goodput"]
    assert ttft["data"][0]["x"] == list(RATES)
    assert sorted(c[0] for c in ttft["data"][0]["customdata"]) == ids
    shapes = ttft["layout"]["shapes"]
    assert {"y0": 150.0} in [{"y0": s.get("y0")} for s in shapes if s["type"] == "line" and s.get("y0") == s.get("y1")]
    assert any(s.get("x0") == 2.0 and s.get("x1") == 2.0 for s in shapes)  # the knee: flat up to 2 req/s
    caption = " ".join(c.value for c in at.caption)
    assert "knee at 2" in caption and "4 runs (4 done)" in caption
    assert "[SLA finder](optimize)" in caption
    pareto = figures[4]
    assert pareto["data"][0]["text"] == ["1", "2", "4", "8"]


def test_an_sla_sweep_shows_the_search_answer_and_marks_it(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    seed_sweep(db, "sla:chat-demo")
    answer = {
        "low": 2.0,
        "high": 4.0,
        "converged": True,
        "unit": "req/s",
        "goal": "TTFT p99 ≤ 150 ms at 90 % goodput",
        "slo": [{"metric": "ttft_ms", "percentile": "p99", "limit_ms": 150.0}],
        "probes": 3,
        "why": "bracket within the resolution (2)",
        "text": "2 req/s (between 2 and 4) at 90 % goodput",
        "boundary": {},
    }
    definition = {
        "base": {"model": {"source": "demo"}},
        "slo": answer["slo"],
        "goodput": 0.9,
        "resolution": 2.0,
    }
    search = store.create(db, "chat-demo", definition)
    assert store.save(db, search, [{"load": 1.0, "status": "passed"}], status="done", answer=answer)
    at = open_page("views/loadcurve.py", sweep="sla:chat-demo")
    assert not at.exception, at.exception
    assert any("2 req/s (between 2 and 4) at 90 % goodput" in m.value for m in at.markdown)
    shapes = _figures(at)[0]["layout"]["shapes"]
    assert any(s["type"] == "rect" and s["x0"] == 2.0 and s["x1"] == 4.0 for s in shapes)


def test_an_unknown_sweep_says_so(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = open_page("views/loadcurve.py", sweep="nope")
    assert not at.exception
    assert any("No runs are stored under the sweep nope" in w.value for w in at.warning)


def test_explore_sweeps_and_a_sweeps_jobs_link_to_its_load_curve(db, db_url, monkeypatch) -> None:
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    seed_sweep(db, "sla:x y")
    at = open_page("views/explore.py", view="sweeps")
    assert not at.exception
    assert any("[sla\\:x y](loadcurve?sweep=sla%3Ax%20y)" in m.value for m in at.markdown)
    at = open_page("views/jobs.py", sweep="sla:x y")
    assert not at.exception
    assert any("[load curves](loadcurve?sweep=sla%3Ax%20y)" in c.value for c in at.caption)


def test_a_sweep_that_stopped_at_saturation_is_marked_with_the_points_not_run(db, db_url, monkeypatch) -> None:
    from storage.series import add_series

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    ids = seed_sweep(db, "stops")
    reason = "in-flight requests grew 2.1/s (95 % CI 1.6–2.6) while achieved 2.5 req/s < offered 8 req/s"
    add_series(db, ids[3], "saturation", {"saturated": True, "reason": reason, "loop": "open"})
    add_series(db, ids[0], "saturation", {"saturated": False, "reason": "kept up", "loop": "open"})
    stop = {
        "stopped_because": f"saturated at 8 req/s: {reason}",
        "load": 8.0,
        "reason": f"not run: saturated at 8 req/s (run {ids[3]}): {reason}",
        "not_run": [
            {"point": "rate 16/s", "load": 16.0, "job_id": 11},
            {"point": "rate 32/s", "load": 32.0, "job_id": 12},
        ],
    }
    add_series(db, ids[3], "sweep_stop", stop)
    at = open_page("views/loadcurve.py", sweep="stops")
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith(f"Stopped at saturation ([run {ids[3]}](run?run={ids[3]})): saturated at 8 req/s: ")
    assert warning.endswith("Not run: rate 16/s, rate 32/s.")
    not_run = next(d.value for d in at.dataframe if "reason" in d.value.columns)
    assert list(not_run["point"]) == ["rate 16/s", "rate 32/s"] and list(not_run["job"]) == [11, 12]
    ttft = _figures(at)[0]
    assert any(a["text"] == "stopped: saturated (not run: rate 16/s, rate 32/s)" for a in ttft["layout"]["annotations"])
    assert next(t for t in ttft["data"] if t["name"] == "saturated")["x"] == [8.0]
    points = next(d.value for d in at.dataframe if "saturated" in d.value.columns)
    assert list(points["saturated"]) == ["no", "", "", "saturated"] and list(points["stopped"])[-1] == "◀ stopped"
