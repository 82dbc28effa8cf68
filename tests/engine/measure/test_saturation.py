"""The saturation detector on synthetic records: simulated servers that keep up and that fall behind,
open and closed loops, with and without the server's own metrics."""

from __future__ import annotations

import numpy as np
import pytest

from engine.measure.records import RequestRecord
from engine.measure.saturation import Verdict, against_previous, judge, side_record, slope

S = 1_000_000_000


def served(rate: float, n: int, service_s: float, slots: int = 1, seed: int = 0, trial: int = 0) -> list[RequestRecord]:
    """Poisson arrivals (scaled like the load driver's: the last one due at n / rate) at a FIFO server
    of ``slots`` slots, each request holding one for ``service_s``; 4 chunks from 30 % of its service on."""
    gaps = np.random.default_rng(seed).exponential(1 / rate, n)
    due = np.cumsum(gaps) * ((n / rate) / gaps.sum())
    free = [0.0] * slots
    out = []
    for i, d in enumerate(due):
        k = int(np.argmin(free))
        start = max(d, free[k])
        free[k] = start + service_s
        chunks = np.linspace(start + 0.3 * service_s, start + service_s, 4)
        rec = RequestRecord(index=i, arrival_ns=S + int(d * S), send_ns=S + int(d * S), prompt_tokens=4, trial=trial)
        for c in chunks:
            rec.add_chunk(S + int(c * S), 1)
        out.append(rec)
    return out


def closed(n: int, concurrency: int, service_s: float) -> list[RequestRecord]:
    """A closed loop: ``concurrency`` requests in flight, each served in ``service_s``, all due at the start."""
    out = []
    for i in range(n):
        send = S + int((i // concurrency) * service_s * S)
        rec = RequestRecord(index=i, arrival_ns=S, send_ns=send, prompt_tokens=4)
        rec.add_chunk(send + int(service_s * S * 0.5), 1)
        rec.add_chunk(send + int(service_s * S), 1)
        out.append(rec)
    return out


def server_series(waiting: list[float], kv: list[float] | None = None, preempted: list[float] | None = None) -> dict:
    """A stored ``server_metrics`` record sampled every 0.1 s from the first send."""
    fields = {"num_requests_waiting": waiting}
    if kv is not None:
        fields["kv_cache_usage_perc"] = kv
    if preempted is not None:
        fields["num_preemptions_total"] = preempted
    return {"t0_ns": S, "t_s": [0.1 * i for i in range(len(waiting))], "fields": fields, "interval_ms": 100}


def test_a_slope_has_a_t_interval() -> None:
    x = np.arange(20, dtype=float)
    up = slope(x, 2 * x + np.random.default_rng(0).normal(0, 1, 20))
    assert up.rising and up.lo < 2 < up.hi and up.n == 20
    flat = slope(x, np.random.default_rng(1).normal(5, 1, 20))
    assert not flat.rising and flat.lo < 0 < flat.hi
    assert slope([1, 1, 1], [1, 2, 3]) is None and slope([1, 2], [1, 2]) is None


@pytest.mark.parametrize("rate", [2.0, 5.0])
def test_a_server_that_keeps_up_is_not_saturated(rate: float) -> None:
    verdict = judge(served(rate, 40, 0.1, seed=int(rate)), "poisson", rate)  # 10 req/s at most
    assert verdict.saturated is False, verdict.reason
    assert "kept up with offered" in verdict.reason and verdict.loop == "open"


@pytest.mark.parametrize("rate", [20.0, 40.0])
def test_a_server_that_falls_behind_while_its_queue_grows_is_saturated(rate: float) -> None:
    verdict = judge(served(rate, 40, 0.1, seed=int(rate)), "poisson", rate)
    assert verdict.saturated is True, verdict.reason
    grew = verdict.evidence["in_flight"]
    assert grew["lo"] > 0 and abs(verdict.achieved - 10) < 1.5
    assert verdict.reason.startswith("in-flight requests grew ") and "(95 % CI " in verdict.reason
    assert f"while achieved {verdict.achieved:.3g} req/s < offered " in verdict.reason


def test_filling_a_wide_server_is_not_saturation() -> None:
    # 16 slots of 0.5 s (32 req/s): at 24 req/s in-flight climbs to 12 in the first half second, then holds
    verdict = judge(served(24, 40, 0.5, slots=16, seed=3), "poisson", 24)
    assert verdict.saturated is False, verdict.reason
    assert judge(served(64, 60, 0.5, slots=16, seed=3), "poisson", 64).saturated is True


def test_false_alarms_and_misses_are_rare_over_many_seeds() -> None:
    # 30 requests a run (a sweep point's usual size): half loaded never alarms, twice overloaded always does
    calm = [judge(served(5, 30, 0.1, seed=seed), "poisson", 5).saturated for seed in range(40)]
    busy = [judge(served(20, 30, 0.1, seed=seed), "poisson", 20).saturated for seed in range(40)]
    assert calm.count(True) == 0 and busy.count(True) == 40


def test_the_servers_waiting_queue_counts_as_the_queue() -> None:
    recs = served(20, 30, 0.1, seed=2)
    verdict = judge(recs, "poisson", 20, server_series([float(i) for i in range(20)]))
    assert verdict.saturated is True and verdict.evidence["server_waiting"]["lo"] > 0


def test_too_few_requests_or_no_offered_load_cannot_tell() -> None:
    assert judge(served(20, 5, 0.1), "poisson", 20).saturated is None
    assert "a verdict needs 8" in judge(served(20, 5, 0.1), "poisson", 20).reason
    everything = judge(served(20, 30, 0.1), "max")
    assert everything.saturated is None and everything.reason.startswith("not judged: everything sent at once")
    assert judge(served(20, 30, 0.1), "batch").loop == "none"
    assert side_record({"arrival": "batch"}, served(20, 30, 0.1), None) == {}


def test_each_trial_is_judged_on_its_own() -> None:
    calm = served(2, 30, 0.1, seed=1, trial=0)
    busy = served(40, 30, 0.1, seed=2, trial=1)
    shift = calm[-1].chunk_ns[-1] + S
    for r in busy:
        r.arrival_ns, r.send_ns, r.chunk_ns = r.arrival_ns + shift, r.send_ns + shift, [t + shift for t in r.chunk_ns]
    assert judge(calm + busy, "poisson", 2).saturated is True
    assert judge(calm, "poisson", 2).saturated is False


def test_a_closed_loop_is_judged_by_the_servers_queue() -> None:
    recs = closed(40, 8, 0.2)
    waiting = judge(recs, "concurrency", 8, server_series([3.0] * 9 + [0.0]))
    assert waiting.saturated is True and "waited at the server in 90 % of its samples" in waiting.reason
    room = judge(recs, "concurrency", 8, server_series([0.0] * 9 + [1.0]))
    assert room.saturated is False and "at concurrency 8" in room.reason
    full = judge(recs, "concurrency", 8, server_series([0.0] * 10, kv=[1.0] * 10, preempted=[0, 0, 3, 5] + [6] * 6))
    assert full.saturated is True and "KV cache was full (100 %) and 6 requests were preempted" in full.reason


def test_a_closed_loop_without_server_metrics_is_judged_against_the_previous_load() -> None:
    alone = judge(closed(40, 8, 0.2), "concurrency", 8)
    assert alone.saturated is None and "judged against the previous load" in alone.reason
    flat = against_previous(alone, (4, 20.0), (8, 21.0))
    assert flat.saturated is True
    assert flat.reason == "throughput rose +5% (20 → 21 req/s) for +100% concurrency (4 → 8)"
    assert against_previous(alone, (4, 20.0), (8, 38.0)).saturated is False
    assert against_previous(alone, None, (8, 38.0)) is alone
    judged = judge(closed(40, 8, 0.2), "concurrency", 8, server_series([0.0] * 10))
    assert against_previous(judged, (4, 20.0), (8, 21.0)) is judged  # the server's own word stands


def test_a_verdict_is_stored_and_read_back() -> None:
    recs = served(40, 30, 0.1)
    record = side_record({"arrival": "poisson", "configured_rate": 40.0}, recs, None)["saturation"]
    back = Verdict.from_dict(record)
    assert back == judge(recs, "poisson", 40.0) and back.label == "saturated"
    assert Verdict.from_dict(None) is None and Verdict.from_dict({"x": 1}) is None
    trace = side_record({"arrival": "trace", "scheduled_rate": 40.0}, recs, None)["saturation"]
    assert trace["offered"] == 40.0 and trace["loop"] == "open"
