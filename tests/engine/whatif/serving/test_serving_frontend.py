"""The API server's queue (``StepCosts.frontend_s``): requests sent together reach the engine one at a time,
so the first is prefilled alone (as a real vLLM server does it), TTFT still counts from the client's send,
and the fast-forward gives exactly the times of stepping one by one."""

from __future__ import annotations

import numpy as np
from serving_seed import LLAMA8B, requests, run, steps_of

from engine.whatif.serving import Arrivals, ServerConfig, StepCosts

FRONT = StepCosts(frontend_s=1e-4)  # a tenth of a millisecond per request, under one step on an H100


def test_requests_sent_together_reach_the_engine_one_at_a_time():
    together = requests([128] * 8, 16)
    at_once = run(together, costs=StepCosts())
    queued = run(together, costs=FRONT)
    assert at_once.step_seqs[0] == 8  # all eight prompts in the first step
    assert queued.step_seqs[0] == 1 and queued.step_tokens[1] == 1 + 7 * 128  # the first alone, then its decode + 7
    assert all(o.send_s == 0.0 for o in queued.requests)  # sent at 0: TTFT counts from there
    assert queued.step_end_s[0] > at_once.step_end_s[0] / 8  # a step of one prompt, after its handover
    assert steps_of(queued, 0)[0] == 0 and steps_of(queued, 1)[0] == 1


def test_the_queue_changes_nothing_for_requests_far_apart():
    spaced = requests([64] * 4, 8, due=[0.0, 1.0, 2.0, 3.0])
    plain, queued = run(spaced, costs=StepCosts()), run(spaced, costs=FRONT)
    first_plain = [plain.first_token_s(o) - o.send_s for o in plain.requests]
    first_queued = [queued.first_token_s(o) - o.send_s for o in queued.requests]
    assert np.allclose(np.array(first_queued) - np.array(first_plain), 1e-4)  # each waits its own handover


def test_the_fast_forward_holds_with_the_queue():
    reqs = requests(list(np.random.default_rng(1).integers(16, 400, 200)), 300)
    config = ServerConfig(max_num_seqs=32, max_num_batched_tokens=512, num_blocks=300)
    arrivals = Arrivals("poisson", rate=4.0, seed=4)
    fast = run(reqs, config, FRONT, arrivals, served=LLAMA8B)
    slow = run(reqs, config, FRONT, arrivals, served=LLAMA8B, fast_forward=False)
    assert np.array_equal(fast.step_end_s, slow.step_end_s) and fast.requests == slow.requests
    assert fast.stats.fast_forwarded_steps > 0
