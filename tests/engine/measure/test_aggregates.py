"""A run's aggregates (engine/measure/aggregates.py): exact per-request figures, binned token gaps, JSON both ways."""

from __future__ import annotations

import numpy as np
import pytest
from seed_runs import make_requests

from engine.measure import aggregates
from engine.measure.aggregates import Aggregates, summarise
from engine.measure.metrics import e2el_ns, group_samples, tpot_ns, ttft_ns
from engine.measure.records import RequestRecord
from storage.jsontext import dumps, loads

MS = 1_000_000


def mixed() -> list[RequestRecord]:
    reqs = make_requests(n=8, output_tokens=6, seed=3)  # one warm-up, then 8 measured
    reqs[2].chunk_tokens[:] = [2, 1, 0, 1, 1, 1]  # several tokens in a chunk, an empty chunk
    reqs[3].chunk_tokens[-1] = 0  # a trailing chunk without a token (its last chunk is not its last token)
    reqs[4].error = "HTTP 500: boom"
    reqs[5].cancelled = True
    reqs[6].chunk_ns, reqs[6].chunk_tokens = [], []
    reqs[6].error = "no tokens returned"
    return reqs


def test_per_request_figures_are_the_requests_own():
    reqs = mixed()
    agg = summarise(reqs)
    samples = group_samples(reqs)
    assert agg.ms("ttft").tolist() == samples["ttft_ms"]
    assert agg.ms("e2el").tolist() == samples["e2el_ms"]
    assert agg.ms("tpot").tolist() == pytest.approx(samples["tpot_ms"], rel=1e-15)
    assert agg.itl["cdf"]["n"] == len(samples["itl_ms"]) and agg.itl["cdf"]["values"] == sorted(samples["itl_ms"])
    assert sum(agg.itl["hist"]["counts"]) == len(samples["itl_ms"]) and not agg.itl["over_time"]["binned"]
    assert agg.errors == {4: "HTTP 500: boom", 6: "no tokens returned"}


def test_endpoint_records_keep_every_per_request_figure():
    reqs = mixed()
    for got, want in zip(summarise(reqs).endpoint_records(), reqs, strict=True):
        assert (got.index, got.send_ns, got.arrival_ns, got.warmup, got.ok, got.cancelled, got.error) == (
            want.index, want.send_ns, want.arrival_ns, want.warmup, want.ok, want.cancelled, want.error,
        )  # fmt: skip
        assert (ttft_ns(got), e2el_ns(got), tpot_ns(got), got.output_tokens) == (
            ttft_ns(want), e2el_ns(want), tpot_ns(want), want.output_tokens,
        )  # fmt: skip
        assert got.chunk_ns[:1] == want.chunk_ns[:1] and got.chunk_ns[-1:] == want.chunk_ns[-1:]
    assert [r.index for r in summarise(reqs).endpoint_records([0, 3])] == [0, 3]


def test_json_round_trip_is_strict_and_versioned():
    agg = summarise(mixed())
    text = dumps(agg.to_json())
    back = Aggregates.from_json(loads(text))
    assert back is not None and back.t0_ns == agg.t0_ns and back.errors == agg.errors and back.itl == agg.itl
    assert all(np.array_equal(back.columns[k], agg.columns[k]) for k in aggregates.COLUMNS)
    assert Aggregates.from_json({**agg.to_json(), "version": 0}) is None  # another layout: made again
    broken = agg.to_json()
    broken["columns"]["send"] = "not base64!"
    assert Aggregates.from_json(broken) is None and Aggregates.from_json(None) is None
    assert len(summarise([])) == 0 and summarise([]).itl["cdf"]["n"] == 0


def test_many_gaps_are_sampled_and_their_median_binned(monkeypatch):
    monkeypatch.setattr(aggregates, "MAX_POINTS", 200)
    reqs = make_requests(n=40, output_tokens=20, warmup=0)  # 760 gaps
    over = summarise(reqs).itl["over_time"]
    assert over["binned"] and over["n"] == 760 and len(over["t"]) == 200 and over["t"] == sorted(over["t"])
    assert 0 < len(over["median_t"]) <= aggregates.TIME_BINS and over["bin_s"] > 0
    gaps = group_samples(reqs)["itl_ms"]
    assert min(gaps) <= min(over["median_y"]) and max(over["median_y"]) <= max(gaps)


def test_binned_median_and_windowed_rate():
    t = np.array([0.1, 0.2, 0.9, 1.0])
    centres, medians, width = aggregates.binned_median(t, np.array([1.0, 3.0, 10.0, 20.0]), bins=2)
    assert width == 0.5 and centres.tolist() == [0.25, 0.75] and medians.tolist() == [2.0, 15.0]
    starts, rate = aggregates.windowed_rate(np.array([0.1, 0.5, 1.5]), np.ones(3))
    assert starts.tolist() == [0.0, 1.0] and rate.tolist() == pytest.approx([2.0, 2.0])


def test_a_short_series_rolling_median_equals_pandas_without_importing_it():
    import numpy as np
    import pandas as pd

    from engine.measure.aggregates import rolling_median

    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 101, 2000):
        for k in (5, 6, 50, 501):
            values = rng.normal(size=n)
            expected = pd.Series(values).rolling(k, center=True, min_periods=1).median().to_numpy()
            assert np.allclose(rolling_median(values, k), expected), (n, k)
