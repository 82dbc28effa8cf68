"""Whole simulated runs: the fast-forward changes no time, invariants over random workloads, and a
predicted run's records go through the project's own metric computation."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from serving_seed import LLAMA8B, run

from engine.measure.metrics import compute_metrics
from engine.whatif.serving import (
    Arrivals,
    DoesNotFit,
    ServerConfig,
    StepCosts,
    sim_request,
    simulator,
    to_records,
    to_run_record,
)
from engine.whatif.serving.requests import SimRequest


def _workload(n: int, seed: int, cancel_share: float = 0.1) -> list[SimRequest]:
    """Mixed lengths, a few shared prefixes, some cancellations and two sessions."""
    rng = np.random.default_rng(seed)
    prefixes = [rng.integers(0, 30_000, int(rng.integers(16, 200))) for _ in range(3)]
    out = []
    for i in range(n):
        own = rng.integers(0, 30_000, int(rng.integers(1, 300)))
        prompt = np.concatenate((prefixes[i % 3], own)) if i % 2 else own
        cancel = float(rng.uniform(0.01, 0.3)) if rng.random() < cancel_share else None
        out.append(sim_request(i, prompt, int(rng.integers(1, 400)), cancel_after_s=cancel))
    return out


def _same(a, b) -> None:
    assert np.array_equal(a.step_end_s, b.step_end_s)
    assert a.requests == b.requests
    assert a.stats.steps == b.stats.steps and a.stats.preemptions == b.stats.preemptions


@pytest.mark.parametrize(("spec", "shortest"), [(0, 1), (3, 1), (0, None)])
def test_the_fast_forward_gives_exactly_the_times_of_stepping_one_by_one(spec, shortest):
    config = ServerConfig(
        max_num_seqs=32, max_num_batched_tokens=512, num_blocks=250, spec_tokens=spec, spec_acceptance=0.6
    )
    reqs = _workload(300, seed=11)
    arrivals = Arrivals("poisson", rate=10.0, seed=2)
    with patch.object(simulator, "_MIN_STRETCH", shortest or simulator._MIN_STRETCH):  # 1: every stretch at once
        fast = run(reqs, config, StepCosts(), arrivals, served=LLAMA8B)
    slow = run(reqs, config, StepCosts(), arrivals, served=LLAMA8B, fast_forward=False)
    _same(fast, slow)
    assert fast.stats.fast_forwarded_steps > (fast.stats.steps / 4 if shortest else 0)
    assert slow.stats.fast_forwarded_steps == 0
    assert fast.stats.preemptions > 0 and any(o.cancelled for o in fast.requests)


_request = st.tuples(st.integers(1, 300), st.integers(1, 120), st.one_of(st.none(), st.floats(0.001, 0.2)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(_request, min_size=1, max_size=12),
    seqs=st.integers(1, 8),
    blocks=st.integers(20, 120),
    chunked=st.booleans(),
    caching=st.booleans(),
    spec=st.integers(0, 3),
    rate=st.floats(10.0, 5000.0),
)
def test_every_request_gets_its_tokens_unless_cancelled_and_kv_never_overflows(
    rows, seqs, blocks, chunked, caching, spec, rate
):
    reqs = [
        sim_request(i, np.arange(p) % 7 + 100 * (i % 3), o, cancel_after_s=c) for i, (p, o, c) in enumerate(rows)
    ]  # prompts that share their first blocks in threes
    config = ServerConfig(
        max_num_seqs=seqs, max_num_batched_tokens=512, num_blocks=blocks, chunked_prefill=chunked,
        prefix_caching=caching, spec_tokens=spec, spec_acceptance=0.5,
    )  # fmt: skip
    arrivals = Arrivals("poisson", rate=rate, seed=len(rows))
    try:
        with patch.object(simulator, "_MIN_STRETCH", 1):
            fast = run(reqs, config, arrivals=arrivals)
    except DoesNotFit:
        assume(False)
        return
    for o in fast.requests:
        _, tokens = fast.chunks(o)
        assert tokens.sum() == o.output_tokens and (tokens > 0).all()
        if not o.cancelled:
            assert o.output_tokens == o.requested_output_tokens
    assert fast.stats.peak_kv_blocks <= blocks
    _same(fast, run(reqs, config, arrivals=arrivals, fast_forward=False))


def test_a_predicted_run_goes_through_the_projects_own_metrics():
    reqs = _workload(80, seed=5, cancel_share=0.0)
    result = run(reqs, ServerConfig(), StepCosts(), Arrivals("poisson", rate=20.0, seed=1), served=LLAMA8B)
    record = to_run_record(result)
    assert record.due_times and len(record.requests) == 80
    metrics = compute_metrics(record)
    ttft_ms = [(result.first_token_s(o) - o.send_s) * 1e3 for o in result.requests]
    e2el_ms = [(o.end_s - o.send_s) * 1e3 for o in result.requests]
    assert metrics["ttft_ms"]["p50"] == pytest.approx(np.percentile(ttft_ms, 50), abs=1e-5)
    assert metrics["e2el_ms"]["p99"] == pytest.approx(np.percentile(e2el_ms, 99), abs=1e-5)
    tokens = sum(o.output_tokens for o in result.requests)
    assert metrics["output_tokens_per_s"] == pytest.approx(tokens / result.stats.duration_s, rel=1e-6)
    assert metrics["tpot_ms"]["n"] == sum(o.output_tokens > 1 for o in result.requests)


def test_records_carry_integer_stamps_from_the_phase_start():
    reqs = [sim_request(0, np.arange(40), 5, cancel_after_s=None), sim_request(1, np.arange(40), 5)]
    result = run(reqs)
    records, start, end = to_records(result, start_ns=10**12)
    assert start == 10**12 and end == start + round(result.stats.duration_s * 1e9)
    second = records[1]
    assert second.cached_prompt_tokens == 32 and second.chunk_tokens == [1, 1, 1, 1, 1]
    assert all(isinstance(t, int) and t > start for t in second.chunk_ns)
    assert second.arrival_ns == second.send_ns == second.ready_ns == start
