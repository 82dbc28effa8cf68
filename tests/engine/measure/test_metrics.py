"""Metric definitions against hand-worked numbers."""

from __future__ import annotations

import pytest

from engine.measure.metrics import SLO, compute_metrics, itl_gaps_ns, summarize, tpot_ns, ttft_ns
from engine.measure.records import RequestRecord, RunRecord

MS = 1_000_000


def req(
    index: int,
    send_ms: float,
    chunks_ms: list[float],
    tokens: list[int] | None = None,
    *,
    arrival_ms: float | None = None,
    error: str | None = None,
    warmup: bool = False,
) -> RequestRecord:
    return RequestRecord(
        index=index,
        arrival_ns=int((send_ms if arrival_ms is None else arrival_ms) * MS),
        send_ns=int(send_ms * MS),
        prompt_tokens=10,
        chunk_ns=[int(c * MS) for c in chunks_ms],
        chunk_tokens=tokens or [1] * len(chunks_ms),
        error=error,
        warmup=warmup,
    )


def test_single_request_by_hand():
    # send at 0; tokens at 100, 150, 210, 260 ms -> TTFT 100, E2EL 260, TPOT (260-100)/3 = 53.33
    r = req(0, 0, [100, 150, 210, 260])
    assert ttft_ns(r) == 100 * MS
    assert tpot_ns(r) == pytest.approx(160 / 3 * MS)
    assert itl_gaps_ns(r) == [50 * MS, 60 * MS, 50 * MS]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=[r]))
    assert m["ttft_ms"]["p50"] == pytest.approx(100)
    assert m["e2el_ms"]["mean"] == pytest.approx(260)
    assert m["tpot_ms"]["mean"] == pytest.approx(160 / 3)
    assert m["itl_ms"]["mean"] == pytest.approx(160 / 3)
    assert m["output_tokens_per_s"] == pytest.approx(4.0)  # 4 tokens in 1 s
    assert m["requests_per_s"] == pytest.approx(1.0)
    assert m["tokens_per_s_per_user"] == pytest.approx(1000 / (160 / 3))


def test_percentiles_use_linear_interpolation():
    s = summarize([1, 2, 3, 4])
    assert s["p50"] == pytest.approx(2.5)
    assert s["p90"] == pytest.approx(3.7)
    assert s["p99"] == pytest.approx(3.97)
    assert summarize([])["p50"] is None


def test_queueing_is_kept_apart_from_ttft():
    r = req(0, send_ms=500, chunks_ms=[600, 650], arrival_ms=0)
    m = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=[r]))
    assert m["ttft_ms"]["mean"] == pytest.approx(100)
    assert m["queue_ms"]["mean"] == pytest.approx(500)


def test_multi_token_chunks_count_tokens_not_chunks():
    # speculative decoding: 1 + 3 + 2 tokens in 3 chunks; TPOT = (300-100)/(6-1) = 40
    r = req(0, 0, [100, 200, 300], [1, 3, 2])
    assert tpot_ns(r) == pytest.approx(40 * MS)
    m = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=[r]))
    assert m["total_output_tokens"] == 6
    assert m["mean_tokens_per_chunk"] == pytest.approx(2.0)
    assert m["itl_ms"]["mean"] == pytest.approx(100)


def test_empty_chunks_are_not_tokens():
    r = req(0, 0, [50, 100, 200], [0, 1, 1])
    assert ttft_ns(r) == 100 * MS
    assert itl_gaps_ns(r) == [100 * MS]


def test_single_token_requests_are_left_out_of_tpot():
    rs = [req(0, 0, [100]), req(1, 0, [100, 200])]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=rs))
    assert m["tpot_ms"]["mean"] == pytest.approx(100)
    assert m["ttft_ms"]["mean"] == pytest.approx(100)


def test_warmup_excluded_and_counted_failures_counted():
    rs = [
        req(0, 0, [10, 20], warmup=True),
        req(1, 0, [100, 200]),
        req(2, 0, [], error="connection reset"),
    ]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=2000 * MS, requests=rs))
    assert m["warmup_excluded"] == 1
    assert m["completed"] == 1
    assert m["failed"] == 1
    assert m["ttft_ms"]["mean"] == pytest.approx(100)


def test_goodput_counts_failures_as_misses():
    rs = [
        req(0, 0, [100, 150, 200]),  # ttft 100, tpot 50, e2el 200
        req(1, 0, [300, 320, 340]),  # ttft 300: misses ttft<=200
        req(2, 0, [], error="500"),
        req(3, 0, [100, 300, 500]),  # tpot 200: misses tpot<=100
    ]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=2000 * MS, requests=rs), SLO(ttft_ms=200, tpot_ms=100))
    assert m["goodput_fraction"] == pytest.approx(0.25)
    assert m["goodput_requests_per_s"] == pytest.approx(0.5)


def test_no_slo_means_no_goodput_not_requests_per_s():
    rs = [req(0, 0, [100, 200]), req(1, 0, [], error="HTTP 500")]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=rs))
    assert m["requests_per_s"] == pytest.approx(1.0)
    assert m["goodput_requests_per_s"] is None and m["goodput_fraction"] is None and m["slo"] is None


def test_error_rate_is_failed_over_measured():
    rs = [req(0, 0, [10], warmup=True), req(1, 0, [100]), req(2, 0, [], error="x"), req(3, 0, [], error="y")]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=rs))
    assert m["error_rate"] == pytest.approx(2 / 3) and m["failed"] == 2 and m["completed"] == 1
    assert compute_metrics(RunRecord(start_ns=0, end_ns=1, requests=[]))["error_rate"] is None


def test_registry_declares_goodput_fraction_and_error_rate():
    from engine.measure import registry

    assert registry.lookup("goodput_fraction").better == "higher"
    assert registry.lookup("error_rate").better == "lower" and registry.lookup("error_rate").unit == "ratio"


def test_every_figure_carries_its_interval_and_sample_count():
    """30 requests: p50 and p90 supported (6, 29), p95/p99 not (59, 299); throughput intervals around the value."""
    rs = [req(i, i * 100, [i * 100 + 20 + i % 3, i * 100 + 40 + i % 5, i * 100 + 60 + i % 7]) for i in range(30)]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=3000 * MS, requests=rs))
    ttft = m["ttft_ms"]
    assert ttft["n"] == 30 and m["itl_ms"]["n"] == 60
    assert ttft["ci"]["p50"][0] <= ttft["p50"] <= ttft["ci"]["p50"][1]
    assert ttft["ci"]["p90"] is not None and ttft["ci"]["p95"] is None and ttft["ci"]["p99"] is None
    assert ttft["ci"]["mean"][0] < ttft["mean"] < ttft["ci"]["mean"][1]
    assert m["itl_ms"]["ci"]["p95"] is not None  # 60 pooled gaps
    for key in ("output_tokens_per_s", "requests_per_s", "tokens_per_s_per_user"):
        lo, hi = m["ci"][key]
        assert lo <= m[key] <= hi, key
    few = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=rs[:4]))
    assert few["ttft_ms"]["ci"]["p50"] is None and few["ci"]["output_tokens_per_s"] is None


def test_intervals_of_a_run_stored_without_them_come_from_its_requests():
    from engine.measure.metrics import interval_fields

    rs = [req(i, i * 100, [i * 100 + 20 + i % 3, i * 100 + 40 + i % 5]) for i in range(10)]
    m = compute_metrics(RunRecord(start_ns=0, end_ns=1000 * MS, requests=rs))
    fields = interval_fields(rs, m["duration_s"])
    assert fields["tpot_ms"]["ci"] == m["tpot_ms"]["ci"] and fields["ci"] == m["ci"]
