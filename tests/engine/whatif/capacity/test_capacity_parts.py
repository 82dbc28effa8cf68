"""The capacity planner's pure parts: the rate search, the SLO check, the traffic's peak window, replicas and
cost (with and without a price), prices and variants as typed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.measure.records import RequestRecord
from engine.whatif.capacity.configs import parse_variant, variants_of
from engine.whatif.capacity.cost import NO_PRICE, Price, cost_of, parse_prices, price_of, replicas_for
from engine.whatif.capacity.search import bracket_of, search
from engine.whatif.capacity.slo import CapacitySLO, Figures, SloError, check_slo
from engine.whatif.capacity.traffic import busiest, peak_rate
from engine.whatif.hardware import CATALOG


def test_the_search_finds_a_known_threshold_from_above_and_from_below():
    for start in (50.0, 0.9, 3.7):
        asked: list[float] = []
        found = search(lambda r, asked=asked: asked.append(r) or r <= 3.7, start, resolution=0.02, max_probes=20)
        assert found.converged and found.low is not None and found.high is not None
        assert found.low <= 3.7 < found.high and found.high / found.low <= 1.02 * (1 + 1e-9)
        assert len(asked) <= 12 and [r for r, _ in found.probes] == asked


def test_the_search_says_when_even_a_light_load_fails_and_when_it_is_cut_short():
    never = search(lambda r: False, 10.0)
    assert never.low is None and not never.converged and "fails even at" in never.why
    assert [r for r, _ in never.probes] == [10.0, 5.0, 2.5, 0.1]  # two halvings, then the floor (1 % of the start)
    short = search(lambda r: r <= 3.7, 1.0, max_probes=3)
    assert (short.low, short.high) == (2.0, 4.0)  # the bracket so far is the answer ...
    assert not short.converged and short.why == "all 3 probes made"  # ... said to be cut short


def test_known_results_are_reused_and_a_pass_above_a_failure_never_widens_the_answer():
    known = {1.0: True, 2.0: True, 4.0: False}
    asked: list[float] = []
    found = search(lambda r: asked.append(r) or r <= 3.0, 100.0, resolution=0.05, known=known)
    assert 100.0 not in asked and all(2.0 < r < 4.0 for r in asked)
    assert bracket_of({1.0: True, 2.0: False, 3.0: True}) == (1.0, 2.0)
    assert found.low is not None and 2.85 < found.low <= 3.0


def _record(
    i: int, first_ms: float, last_ms: float, n: int = 5, late_ms: float = 0.0, ok: bool = True
) -> RequestRecord:
    send = int(late_ms * 1e6)
    r = RequestRecord(index=i, arrival_ns=0, send_ns=send, prompt_tokens=4, error=None if ok else "boom")
    if ok:
        r.chunk_ns = [send + int(first_ms * 1e6)] + [send + int(last_ms * 1e6)] * (1 if n > 1 else 0)
        r.chunk_tokens = [1, n - 1] if n > 1 else [1]
    return r


def test_the_slo_holds_at_its_percentile_counted_from_the_due_time():
    records = [_record(i, 100 + i, 1000 + 10 * i) for i in range(10)]
    records.append(_record(10, 100, 1000, late_ms=900))  # waited 900 ms for its batch: TTFT 1000 ms from its due
    figures = Figures.of(records)
    assert figures.percentile("ttft_ms", 50) == pytest.approx(105.0)
    assert figures.percentile("ttft_ms", 100) == pytest.approx(1000.0)
    ok = check_slo(CapacitySLO(ttft_ms=150, percentile=90), figures)
    assert ok.passed and ok.ratio == pytest.approx(figures.percentile("ttft_ms", 90) / 150)
    bad = check_slo(CapacitySLO(ttft_ms=150, e2el_ms=1000, percentile=95), figures)
    assert not bad.passed and any(r.startswith("TTFT p95") for r in bad.reasons) and bad.ratio > 1


def test_goodput_counts_failed_requests_as_misses():
    records = [_record(i, 100, 500) for i in range(8)] + [_record(8, 900, 950), _record(9, 0, 0, ok=False)]
    slo = CapacitySLO(ttft_ms=200, goodput=0.8)
    check = check_slo(slo, Figures.of(records))
    assert check.values == {"goodput": pytest.approx(0.8)} and check.passed
    assert not check_slo(CapacitySLO(ttft_ms=200, goodput=0.9), Figures.of(records)).passed
    assert slo.words() == "goodput ≥ 80 % (TTFT ≤ 200 ms per request)"


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({}, "give an SLO"), ({"ttft_ms": -1}, "positive"), ({"ttft_ms": 5, "percentile": 100}, "percentile"),
     ({"ttft_ms": 5, "goodput": 1.5}, "goodput")],
)  # fmt: skip
def test_an_slo_that_cannot_be_checked_says_what_to_give(kwargs, needle):
    with pytest.raises(SloError, match=needle):
        CapacitySLO(**kwargs)


def test_the_peak_is_the_busiest_window_of_the_traffic_s_own_due_times():
    due = np.concatenate([np.arange(0, 600, 1.0), 600 + np.arange(0, 60, 0.25), 660 + np.arange(0, 600, 1.0)])
    assert peak_rate(due, 60.0) == pytest.approx(4.0)  # 240 requests due in the minute at 600 s
    assert peak_rate(due, 10_000.0) == pytest.approx(len(due) / (due[-1] - due[0]))  # a window beyond the span
    picked = busiest(due, 100)
    assert due[picked].min() >= 600 and due[picked].max() < 660
    with pytest.raises(ValueError, match="all due at once"):
        peak_rate(np.zeros(5), 60.0)


def test_replicas_and_cost_per_million_output_tokens():
    assert replicas_for(50.0, 16.8) == 3 and replicas_for(32.0, 16.0) == 2 and replicas_for(0.5, 16.0) == 1
    assert replicas_for(50.0, None) is None
    price = Price(2.0, "given")
    cost = cost_of(peak_rate=50.0, mean_rate=20.0, tokens_per_arrival=100.0, sustained=16.8, tp=2, price=price)
    assert (cost.replicas, cost.gpu_hours_per_hour, cost.usd_per_hour) == (3, 6, 12.0)
    assert cost.usd_per_million_tokens == pytest.approx(12.0 / (20.0 * 100.0 * 3600) * 1e6)  # sized for the peak
    unpriced = cost_of(50.0, 20.0, 100.0, 16.8, 2, Price(None, NO_PRICE))
    assert unpriced.replicas == 3 and unpriced.usd_per_million_tokens is None and unpriced.words() == NO_PRICE


def test_a_price_given_beats_the_catalog_and_an_entry_without_one_has_no_price():
    assert price_of(CATALOG["h100-sxm"], {}).per_device_hour == CATALOG["h100-sxm"].price_per_hour
    assert "2026-05-07" in CATALOG["h100-sxm"].notes and "lambda.ai/pricing" in CATALOG["h100-sxm"].notes
    given = price_of(CATALOG["h100-sxm"], parse_prices("h100-sxm=4.5"))
    assert given.per_device_hour == 4.5 and given.words() == "$4.5 per device-hour (given: your assumption)"
    assert price_of(CATALOG["mi300x"], {}) == Price(None, NO_PRICE)
    for bad in ("h100-sxm", "h100-sxm=0", "h100-sxm=x", "=3", "h100-sxm=inf"):
        with pytest.raises(ValueError, match="HARDWARE=USD"):
            parse_prices(bad)


def test_variants_are_a_name_and_knobs():
    v = parse_variant("fp8:kv_cache_dtype=fp8, enable-prefix-caching=false")
    assert v.name == "fp8" and v.knobs == {"kv_cache_dtype": "fp8", "enable_prefix_caching": False}
    assert [x.name for x in variants_of([])] == ["base"] and variants_of(["base"])[0].knobs == {}
    for bad, needle in (("fp8:kv", "not KNOB=VALUE"), (":a=b", "a name"), ("x:engine=vllm", "not KNOB=VALUE")):
        with pytest.raises(ValueError, match=needle):
            parse_variant(bad)
    with pytest.raises(ValueError, match="given twice"):
        variants_of(["a", "a:max_num_seqs=4"])
    assert math.isfinite(CATALOG["l40s"].price_per_hour or math.nan)
