"""The simulated client and the plan it replays: due times, closed loops, sessions, plans."""

from __future__ import annotations

import numpy as np
import pytest
from serving_seed import in_flight_peak, requests, run

from engine.backends.base import Request
from engine.run.driver import arrival_offsets_s
from engine.run.plan import PlannedRequest, RequestPlan, plan_of, with_cancellations
from engine.whatif.serving import Arrivals, DoesNotFit, ServerConfig, arrivals_of, requests_from_plan, sim_request


def test_open_arrivals_are_the_load_drivers_own_due_times():
    result = run(requests([64] * 50, 8), arrivals=Arrivals("gamma", rate=30.0, burstiness=0.5, seed=4))
    expected = arrival_offsets_s(50, "gamma", 30.0, 0.5, 4)
    assert [o.due_s for o in result.requests] == pytest.approx(expected.tolist())
    assert all(o.send_s == o.due_s for o in result.requests)  # the simulated client never lags
    assert result.due_times


def test_a_trace_is_replayed_on_its_own_schedule():
    due = [0.0, 0.5, 0.25, 2.0]
    result = run(requests([64] * 4, 4, due=due), arrivals=Arrivals("poisson", rate=1.0))
    assert [o.send_s for o in result.requests] == due


def test_a_concurrency_closed_loop_never_exceeds_its_limit():
    result = run(requests([64] * 40, 30), arrivals=Arrivals("concurrency", max_concurrency=3))
    assert in_flight_peak(result) == 3
    ends = sorted(o.end_s for o in result.requests)
    sends = sorted(o.send_s for o in result.requests)
    assert sends[3:] == pytest.approx(ends[: len(sends) - 3])  # each send takes the slot an end freed


def test_batch_arrivals_send_each_wave_when_the_previous_one_has_ended():
    result = run(requests([64] * 6, [4, 8, 4, 4, 4, 4]), arrivals=Arrivals("batch", batch_size=2))
    sends = [o.send_s for o in result.requests]
    ends = [o.end_s for o in result.requests]
    assert sends[:2] == [0.0, 0.0] and sends[2] == sends[3] == max(ends[:2]) and sends[4] == max(ends[2:4])


def _session(turns: int, session: int, base: int) -> list:
    out = [sim_request(base, np.arange(40) + 7 * session, 20, session=session, turn=0)]
    out += [sim_request(base + t, np.arange(10) + 100 * t, 20, session=session, turn=t) for t in range(1, turns)]
    return out


def test_a_sessions_next_turn_comes_after_the_reply_and_the_think_time_and_hits_the_cache():
    reqs = _session(3, 5, 0)
    result = run(reqs, arrivals=Arrivals("max", think_time_s=0.5, seed=9))
    t0, t1, t2 = result.requests
    rng = np.random.default_rng((9, 5))  # the load driver's seeding, per session
    assert t1.send_s == pytest.approx(t0.end_s + rng.exponential(0.5))
    assert t2.send_s == pytest.approx(t1.end_s + rng.exponential(0.5))
    assert t1.prompt_tokens == 40 + 20 + 10 and t2.prompt_tokens == t1.prompt_tokens + 20 + 10
    assert t1.cached_prompt_tokens == (40 + 20 - 1) // 16 * 16  # the whole conversation so far, as computed
    assert t1.due_s == t1.send_s


def test_sessions_hold_their_slot_for_all_their_turns():
    reqs = _session(3, 0, 0) + _session(3, 1, 3)
    result = run(reqs, arrivals=Arrivals("concurrency", max_concurrency=1, think_time_s=0.1))
    assert result.requests[3].send_s == pytest.approx(result.requests[2].end_s)  # session 1 after session 0


def test_a_cancelled_turn_still_leads_to_the_next_one():
    reqs = _session(2, 0, 0)
    reqs[0] = sim_request(0, np.arange(40), 400, session=0, turn=0, cancel_after_s=0.02)
    result = run(reqs, arrivals=Arrivals("max"))
    first, second = result.requests
    assert first.cancelled and second.send_s == pytest.approx(0.02)
    assert second.prompt_tokens == 40 + first.output_tokens + 10


def _plan(n: int, prompt: int, output: int) -> RequestPlan:
    rng = np.random.default_rng(0)
    return plan_of("synthetic", [rng.integers(0, 1000, prompt).tolist() for _ in range(n)], output, warmup=2)


def test_a_plan_becomes_the_simulators_requests_with_its_cancellations():
    plan = with_cancellations(_plan(12, 100, 16), rate=0.5, after_ms=10.0, seed=1)
    reqs = requests_from_plan(plan, 16)
    assert len(reqs) == 10 and [r.index for r in reqs] == list(range(10))
    assert [r.cancel_after_s for r in reqs] == [p.cancel_after_s for p in plan.measured]
    assert all(r.prompt_tokens == 100 and r.output_tokens == 16 and len(r.block_hashes) == 6 for r in reqs)
    assert len(requests_from_plan(plan, 16, warmup=True)) == 2


def test_a_sessions_later_turn_takes_its_new_message_through_the_plans_chat_template():
    first = PlannedRequest(Request([1, 2, 3, 4], 8, messages=({"role": "user", "content": "hi"},)), session=0, turn=0)
    later = PlannedRequest(Request([], 8, messages=({"role": "user", "content": "more"},)), session=0, turn=1)
    plan = RequestPlan("sessions", [], [first, later], chat_ids=lambda messages: [9] * (3 * len(messages)))
    reqs = requests_from_plan(plan, 16)
    assert reqs[1].later_turn and reqs[1].turn_ids is not None and reqs[1].turn_ids.tolist() == [9, 9, 9]


def test_same_seed_same_run_and_another_seed_another():
    reqs = requests([200] * 60, 40)
    config = ServerConfig(spec_tokens=2, spec_acceptance=0.6, num_blocks=200)
    a = run(reqs, config, arrivals=Arrivals("poisson", rate=200.0, seed=3))
    b = run(reqs, config, arrivals=Arrivals("poisson", rate=200.0, seed=3))
    c = run(reqs, config, arrivals=Arrivals("poisson", rate=200.0, seed=4))
    assert np.array_equal(a.step_end_s, b.step_end_s) and a.requests == b.requests
    assert not np.array_equal(a.step_end_s[:50], c.step_end_s[:50])


def test_a_prompt_longer_than_the_whole_kv_cache_does_not_fit_in_one_line():
    with pytest.raises(DoesNotFit) as err:
        run(requests([100, 2000], 10), ServerConfig(num_blocks=100))
    assert str(err.value).startswith("request 1: 2000 prompt + 10 output tokens need 126 KV blocks")
    with pytest.raises(DoesNotFit, match="without chunked prefill"):
        run(requests([3000], 10), ServerConfig(chunked_prefill=False, max_num_batched_tokens=2048))


def test_requests_hashed_for_another_block_size_are_refused():
    with pytest.raises(ValueError, match="blocks of 32"):
        run(requests([100], 4, block_size=32))


def test_a_workloads_arrival_fields_make_the_client():
    from engine.spec import Workload

    workload = Workload(arrival="gamma", rate=5.0, burstiness=0.5, seed=3, max_concurrency=4)
    assert arrivals_of(workload) == Arrivals("gamma", rate=5.0, burstiness=0.5, seed=3, max_concurrency=4)


def test_a_transformers_like_engine_is_the_static_configuration():
    config = ServerConfig.static(4, num_blocks=500)
    assert config.static_batches and config.max_num_seqs == 4 and not config.chunking and not config.prefix_caching
    result = run(requests([100] * 8, 10), config)
    assert result.step_seqs.max() == 4 and result.stats.prefix_hits_tokens == 0
