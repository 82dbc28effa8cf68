"""The simulated scheduler, case by case, against times and steps worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from serving_seed import SMALL, requests, run, steps_of

from engine.whatif.serving import IDEAL, Arrivals, ServerConfig, StepBatch, sim_request, step_time


def test_one_request_ttft_is_its_prefill_step_and_each_token_a_decode_step():
    result = run(requests([100], 3))
    o = result.requests[0]
    prefill = step_time(StepBatch(seqs=1, prefill_tokens=100, logits=1, context_tokens=100,
                                  attention_pairs2=100 * 101, arrivals=1, output_tokens=1), SMALL, 1, IDEAL)  # fmt: skip
    decode1 = step_time(StepBatch(1, 0, 1, 1, 101, 2 * 100 + 2, 0, 1), SMALL, 1, IDEAL)
    decode2 = step_time(StepBatch(1, 0, 1, 1, 102, 2 * 101 + 2, 0, 1), SMALL, 1, IDEAL)
    assert result.first_token_s(o) == pytest.approx(prefill, rel=1e-12)
    times, tokens = result.chunks(o)
    assert tokens.tolist() == [1, 1, 1]
    assert np.diff(times) == pytest.approx([decode1, decode2], rel=1e-9)
    assert o.output_tokens == 3 and o.end_s == pytest.approx(prefill + decode1 + decode2, rel=1e-12)
    assert result.stats.steps == 3


def test_chunked_prefill_splits_a_long_prompt_over_budget_sized_steps_while_decodes_flow():
    config = ServerConfig(max_num_seqs=4, max_num_batched_tokens=64)
    result = run(requests([32, 200], [20, 2]), config)
    # step 0: A's 32 tokens + B's first 32; then A decodes (1) and B takes the rest of the budget (63)
    assert result.step_tokens[:4].tolist() == [64, 64, 64, 1 + 200 - 32 - 63 - 63]
    assert steps_of(result, 1)[0] == 3  # B's first token: the step that completed its prompt
    assert steps_of(result, 0)[:4] == [0, 1, 2, 3]  # A's decodes went on meanwhile
    assert [o.output_tokens for o in result.requests] == [20, 2]


def test_without_chunking_a_prompt_waits_for_a_step_with_room_for_all_of_it():
    config = ServerConfig(max_num_seqs=4, max_num_batched_tokens=128, chunked_prefill=False)
    result = run(requests([100, 100], [5, 5]), config)
    assert steps_of(result, 0)[0] == 0 and steps_of(result, 1)[0] == 1  # 100 + 100 > 128: one at a time
    assert result.step_tokens[:2].tolist() == [100, 1 + 100]


def test_max_num_seqs_caps_the_batch_and_the_rest_queue_in_arrival_order():
    result = run(requests([50] * 5, 10), ServerConfig(max_num_seqs=2, max_num_batched_tokens=4096))
    assert result.step_seqs.max() == 2
    firsts = [steps_of(result, i)[0] for i in range(5)]
    assert firsts == sorted(firsts) and firsts[2] > firsts[0]
    ends = [steps_of(result, i)[-1] for i in range(2)]
    assert firsts[2] == min(ends) + 1  # a seat frees when a request ends


def test_a_small_kv_pool_preempts_and_every_request_still_gets_all_its_tokens():
    config = ServerConfig(max_num_seqs=8, max_num_batched_tokens=512, num_blocks=24)
    result = run(requests([40] * 6, 60), config)
    assert result.stats.preemptions > 0
    assert result.stats.peak_kv_blocks <= 24
    for o in result.requests:
        _, tokens = result.chunks(o)
        assert o.output_tokens == 60 and tokens.sum() == 60 and not o.cancelled
    assert sum(o.preemptions for o in result.requests) == result.stats.preemptions
    preempted = next(o for o in result.requests if o.preemptions)
    assert len(preempted.runs) == preempted.preemptions + 1  # tokens resumed after each recompute


def test_preemption_takes_the_most_recently_admitted_request():
    config = ServerConfig(max_num_seqs=4, max_num_batched_tokens=512, num_blocks=8)
    result = run(requests([30, 30, 30], 40), config)  # 2 blocks each to start, 5 at the end
    assert result.requests[0].preemptions == 0
    assert result.requests[2].preemptions >= 1


def _shared(prefix: np.ndarray, own: int, seed: int) -> np.ndarray:
    return np.concatenate((prefix, np.random.default_rng(seed).integers(0, 30_000, own)))


def test_a_shared_prefix_hits_the_cache_for_its_full_blocks_only():
    prefix = np.random.default_rng(7).integers(0, 30_000, 40)  # 2 full blocks of 16, 8 tokens over
    reqs = [
        sim_request(0, _shared(prefix, 20, 1), 4, due_s=0.0),
        sim_request(1, _shared(prefix, 25, 2), 4, due_s=1.0),
    ]
    result = run(reqs)
    assert [o.cached_prompt_tokens for o in result.requests] == [0, 32]
    assert result.stats.prefix_hits_tokens == 32 and result.stats.prefix_queries_tokens == 60 + 65
    assert result.stats.prefix_hit_rate == pytest.approx(32 / 125)


def test_the_same_prompt_again_computes_at_least_its_last_token():
    prompt = np.random.default_rng(3).integers(0, 30_000, 64)  # exactly 4 blocks
    reqs = [sim_request(0, prompt, 2, due_s=0.0), sim_request(1, prompt, 2, due_s=1.0)]
    assert run(reqs).requests[1].cached_prompt_tokens == 48


def test_without_prefix_caching_nothing_hits():
    prompt = np.random.default_rng(3).integers(0, 30_000, 64)
    reqs = [sim_request(0, prompt, 2, due_s=0.0), sim_request(1, prompt, 2, due_s=1.0)]
    result = run(reqs, ServerConfig(prefix_caching=False))
    assert [o.cached_prompt_tokens for o in result.requests] == [0, 0] and result.stats.prefix_hits_tokens == 0


def test_a_cancelled_request_frees_its_blocks_and_gets_no_token_after_its_cancellation():
    a = sim_request(0, np.arange(50), 400, due_s=0.0, cancel_after_s=0.05)
    b = sim_request(1, np.arange(400) + 7, 3, due_s=0.03)  # needs 25 of the 30 blocks: only once A's are free
    result = run([a, b], ServerConfig(max_num_seqs=2, max_num_batched_tokens=512, num_blocks=30))
    first, second = result.requests
    times, tokens = result.chunks(first)
    assert first.cancelled and first.end_s == pytest.approx(0.05) and 0 < first.output_tokens < 400
    assert times.max() <= 0.05 and tokens.sum() == first.output_tokens
    start_b = result.step_end_s[steps_of(result, 1)[0] - 1]  # B's prefill started when the step before ended
    assert start_b >= 0.05 > result.step_end_s[steps_of(result, 0)[-1]]
    assert second.output_tokens == 3 and not second.cancelled and result.stats.preemptions == 0


def test_speculative_decoding_gives_chunks_of_several_tokens_in_fewer_steps():
    plain = run(requests([64] * 4, 200), ServerConfig(max_num_batched_tokens=8192))
    spec = run(requests([64] * 4, 200), ServerConfig(spec_tokens=3, spec_acceptance=0.7, max_num_batched_tokens=8192))
    assert spec.stats.steps < plain.stats.steps
    for o in spec.requests:
        _, tokens = spec.chunks(o)
        assert o.output_tokens == 200 and tokens.sum() == 200 and tokens.max() > 1 and tokens.max() <= 4
    yields = spec.step_yield[: spec.stats.steps]
    assert 1.0 + 3 * 0.7 == pytest.approx(yields.mean(), abs=0.15)


def test_static_batches_admit_the_next_batch_only_after_the_previous_one_has_finished():
    config = ServerConfig(max_num_seqs=2, static_batches=True)
    result = run(requests([30, 60, 40, 20, 50], [5, 9, 4, 4, 4]), config)
    first = [steps_of(result, i)[0] for i in range(5)]
    last = [steps_of(result, i)[-1] for i in range(5)]
    assert first[0] == first[1] == 0
    assert first[2] == first[3] == max(last[0], last[1]) + 1  # after the longer one, not the first freed seat
    assert first[4] == max(last[2], last[3]) + 1
    assert result.step_tokens[0] == 90  # whole prompts, no budget


def test_static_batches_queue_under_an_arrival_process():
    config = ServerConfig(max_num_seqs=1, static_batches=True)
    result = run(requests([100] * 20, 50), config, arrivals=Arrivals("poisson", rate=2000.0, seed=1))
    waits = [result.first_token_s(o) - o.send_s for o in result.requests]
    assert waits[-1] > 10 * waits[0]  # one at a time: the later ones waited for all before them
