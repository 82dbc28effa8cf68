"""Time series over a run from hand-built stamps: windows, in-flight counts, TTFT/ITL points, trials."""

from __future__ import annotations

import numpy as np
import pytest
from seed_runs import make_requests

from engine.measure.records import RequestRecord
from engine.report.timeseries import (
    in_flight,
    itl_over_time,
    repeat_starts,
    rolling_median,
    timeseries_figure,
    tokens_per_s,
    ttft_over_time,
)

S = 1_000_000_000
MS = 1_000_000


def _req(index: int, send_s: float, token_s: list[float], *, warmup: bool = False, trial: int = 0) -> RequestRecord:
    r = RequestRecord(index=index, arrival_ns=int(send_s * S), send_ns=int(send_s * S), prompt_tokens=8)
    r.warmup, r.trial = warmup, trial
    for t in token_s:
        r.add_chunk(int(t * S), 1)
    return r


def test_tokens_per_second_in_one_second_windows():
    # 3 tokens in [0, 1), 2 in [1, 2), the last window covers 0.5 s with 1 token -> 2 tok/s
    reqs = [_req(0, 0.0, [0.1, 0.5, 0.9, 1.2, 1.8]), _req(1, 1.0, [2.5])]
    series = tokens_per_s(reqs)
    assert series.t.tolist() == [0.0, 1.0, 2.0]
    assert series.y.tolist() == pytest.approx([3.0, 2.0, 2.0])


def test_warmup_and_failed_requests_are_left_out_of_throughput():
    reqs = [_req(0, 0.0, [0.2, 0.4], warmup=True), _req(1, 0.5, [0.6, 0.7]), _req(2, 0.5, [0.8])]
    reqs[2].error = "boom"
    series = tokens_per_s(reqs)
    assert series.t.tolist() == [0.0]  # the clock starts at the first measured send (0.5 s)
    assert series.y[0] == pytest.approx(2 / 0.2)  # 2 tokens over the 0.2 s the last window covers


def test_requests_in_flight_steps_up_at_send_and_down_at_the_last_chunk():
    reqs = [_req(0, 0.0, [1.0, 2.0]), _req(1, 0.5, [1.5]), _req(2, 2.0, [3.0])]
    series = in_flight(reqs)
    # +1 at 0, +1 at 0.5, -1 at 1.5, end(0) and send(2) at 2.0: the end first, -1 at 3
    assert series.t.tolist() == [0.0, 0.5, 1.5, 2.0, 2.0, 3.0]
    assert series.y.tolist() == [1, 2, 1, 0, 1, 0]


def test_ttft_per_request_and_itl_per_token():
    reqs = [_req(0, 0.0, [0.05, 0.06, 0.08]), _req(1, 1.0, [1.2, 1.25])]
    ttft = ttft_over_time(reqs)
    assert ttft.t.tolist() == [0.0, 1.0] and ttft.y.tolist() == pytest.approx([50.0, 200.0])
    itl = itl_over_time(reqs)
    assert itl.t.tolist() == pytest.approx([0.06, 0.08, 1.25])
    assert itl.y.tolist() == pytest.approx([10.0, 20.0, 50.0])


def test_rolling_median_is_centred_and_robust():
    values = np.array([1.0, 1.0, 100.0, 1.0, 1.0, 1.0, 1.0])
    assert rolling_median(values, 3).tolist() == [1.0] * 7
    assert rolling_median(np.zeros(0)).size == 0


def test_trial_boundaries_on_one_clock():
    reqs = [_req(0, 0.0, [0.1], trial=0), _req(1, 0.2, [0.3], trial=0), _req(2, 5.0, [5.1], trial=1)]
    assert repeat_starts(reqs) == [(1, 5.0)]
    assert repeat_starts(reqs[:2]) == []
    fig = timeseries_figure(reqs)
    assert any(a.text == "trial 1" for a in fig.layout.annotations)


def test_figure_has_four_panels_labelled_from_the_registry():
    reqs = make_requests(n=6)
    fig = timeseries_figure(reqs)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        "output tokens/s in 1 s windows",
        "requests in flight",
        "TTFT per request",
        "ITL (AIPerf: ICL) per token",
    ]
    assert fig.layout.yaxis.title.text == "[tok/s]" and fig.layout.yaxis2.dtick == 1
    assert len(timeseries_figure([]).data) == 6  # empty series, no error


def test_report_overlay_widens_windows_for_long_runs():
    from engine.report.timeseries import throughput_overlay

    short = [_req(0, 0.0, [0.5, 1.5, 2.5])]
    long = [_req(0, 0.0, [10.0 * k for k in range(1, 101)])]  # 1000 s
    fig = throughput_overlay({"short": short, "long": long}, max_windows=100)
    assert "(10 s windows)" in fig.layout.title.text
    assert len(fig.data) == 2 and len(fig.data[1].x) == 100
    assert "(1 s windows)" in throughput_overlay({"short": short}).layout.title.text


def test_the_run_pages_figure_from_aggregates_is_the_requests_own():
    from engine.measure.aggregates import summarise
    from engine.report.timeseries import over_time_figure

    reqs = make_requests(n=30, output_tokens=5) + [_req(99, 0.0, [], trial=0)]
    assert over_time_figure(summarise(reqs)).to_json() == timeseries_figure(reqs).to_json()
    fig = over_time_figure(summarise(reqs))
    ttft = ttft_over_time(reqs)
    assert list(fig.data[2].y) == pytest.approx(ttft.y.tolist()) and list(fig.data[4].y) == pytest.approx(
        itl_over_time(reqs).y.tolist()
    )


def test_a_large_run_is_drawn_from_samples_and_bins_and_says_so(monkeypatch):
    from engine.measure import aggregates
    from engine.report import timeseries

    monkeypatch.setattr(aggregates, "MAX_POINTS", 300)
    monkeypatch.setattr(timeseries, "MAX_POINTS", 300)
    reqs = make_requests(n=400, output_tokens=6, warmup=0, gap_ms=-40.0)  # overlapping requests
    fig = timeseries.over_time_figure(aggregates.summarise(reqs))
    titles = [a.text for a in fig.layout.annotations]
    assert "the most in each" in titles[1] and titles[2].endswith("(300 of 400, evenly spread)")
    assert "300 of 2,000 sampled; median per" in titles[3]
    assert all(len(t.x) <= 2 * 300 + 1 for t in fig.data)
