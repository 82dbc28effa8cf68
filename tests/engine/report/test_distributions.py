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
