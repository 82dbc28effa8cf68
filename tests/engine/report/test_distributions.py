"""Distribution figures of raw stamps: CDF, histogram, per-request timeline."""

from __future__ import annotations

from seed_runs import make_requests

from engine.report.distributions import cdf_figure, histogram_figure, latency_samples, timeline_figure


def test_cdf_histogram_timeline():
    reqs = make_requests(n=5, ttft_ms=30, tpot_ms=5, output_tokens=4)
    samples = latency_samples(reqs)
    assert len(samples["ttft_ms"]) == 5 and len(samples["tpot_ms"]) == 5 and len(samples["itl_ms"]) == 15
    fig = cdf_figure({"a": samples["ttft_ms"], "b": []}, "ttft_ms")
    assert len(fig.data) == 1 and fig.data[0].y[-1] == 1.0 and list(fig.data[0].x) == sorted(fig.data[0].x)
    assert "TTFT" in fig.layout.title.text
    hist = histogram_figure(samples["itl_ms"], "itl_ms")
    assert len(hist.data[0].x) == 15
    reqs[2].error = "boom"
    tl = timeline_figure(reqs)
    names = {t.name for t in tl.data}
    assert {"to first token", "decoding", "failed"} <= names
    first = [t for t in tl.data if t.name == "to first token"][0]
    assert min(first.base) == 0.0 and all(v > 20 for v in first.x)
    assert len(timeline_figure([]).data) == 0


def test_histogram_count_axis_has_whole_number_ticks():
    from engine.report.distributions import count_step

    hist = histogram_figure([1.0, 2.0, 2.5, 3.0], "ttft_ms")
    assert hist.layout.yaxis.dtick == 1 and hist.layout.yaxis.tick0 == 0
    assert sum(hist.data[0].y) == 4
    assert count_step(0) == 1 and count_step(5) == 1 and count_step(13) == 3
    assert histogram_figure([], "ttft_ms").data == ()


def test_requested_vs_actual_tokens():
    from engine.report.distributions import Requested, token_histograms

    reqs = make_requests(n=6, output_tokens=8)
    reqs[3].chunk_tokens[-1] = 0  # one request stopped a token short
    spec = {
        "workload": {"prompt_tokens": 32, "output_tokens": 8, "prompt_length": "uniform", "prompt_length_spread": 0.25}
    }
    requested = Requested.from_spec(spec)
    assert requested.prompt_range() == (24.0, 40.0)
    fig = token_histograms(reqs, requested)
    prompt, output = fig.data
    assert sum(prompt.y) == 6 and list(prompt.x) == [32]  # warm-up left out
    assert dict(zip(output.x, output.y, strict=True)) == {7: 1, 8: 5}
    assert [a.text for a in fig.layout.annotations if a.text.startswith("requested")] == ["requested 32", "requested 8"]
    assert isinstance(fig.layout.yaxis.dtick, int)
    assert Requested.from_spec({"workload": {"prompt_file": "x.txt", "output_tokens": 8}}).prompt_tokens is None


def test_small_sample_warnings_use_the_interval_rule():
    from engine.report.distributions import small_sample_warnings

    (line,) = small_sample_warnings({"ttft_ms": [1.0] * 12})
    assert line.startswith("TTFT, 12 requests: p99 is the largest value;")
    assert "not tail estimates (a 95 % interval needs 29 for p90, 59 for p95, 299 for p99)" in line
    (line,) = small_sample_warnings({"itl_ms": [1.0] * 100})
    assert line == (
        "ITL (AIPerf: ICL), 100 token gaps: p99 is the 2nd largest value: not a tail estimate "
        "(a 95 % interval needs 299 for p99)"
    )
    assert "even p50 has no 95 % interval (needs 6)" in small_sample_warnings({"tpot_ms": [1.0] * 4})[0]
    assert small_sample_warnings({"ttft_ms": [1.0] * 300, "tpot_ms": []}) == []


def test_cdf_of_a_large_sample_is_thinned_to_its_order_statistics():
    values = list(range(100_000))
    fig = cdf_figure({"big": values}, "itl_ms", max_points=500)
    trace = fig.data[0]
    assert len(trace.x) == 500 and trace.x[0] == 0 and trace.x[-1] == 99_999
    assert trace.y[-1] == 1.0 and trace.name == "big (n=100000)"


def test_the_run_pages_figures_from_aggregates_say_when_they_are_sampled():
    from engine.measure.aggregates import summarise
    from engine.report.distributions import (
        Requested,
        latency_samples_of,
        timeline_of,
        token_figure_of,
        token_histograms,
    )

    reqs = make_requests(n=50, output_tokens=5)
    agg = summarise(reqs)
    samples, raw = latency_samples_of(agg), latency_samples(reqs)
    assert samples["ttft_ms"].tolist() == raw["ttft_ms"]
    same = (
        cdf_figure({"a": samples["itl_ms"]}, "itl_ms").to_json() == cdf_figure({"a": raw["itl_ms"]}, "itl_ms").to_json()
    )
    assert same and "order statistics" not in cdf_figure({"a": raw["itl_ms"]}, "itl_ms").layout.title.text
    assert (
        histogram_figure(samples["itl_hist"], "itl_ms").to_json() == histogram_figure(raw["itl_ms"], "itl_ms").to_json()
    )
    requested = Requested(32, 5)
    assert token_figure_of(agg, requested).to_json() == token_histograms(reqs, requested).to_json()
    assert timeline_of(agg).layout.title.text == "Per-request timeline"
    sampled = timeline_of(agg, limit=10)
    assert sampled.layout.title.text == "Per-request timeline: 10 of 51 requests (every 5th)"
    thinned = cdf_figure({"big": list(range(5000))}, "itl_ms", max_points=100)
    assert thinned.layout.title.text.endswith("(drawn through 100 of 5,000 order statistics)")
