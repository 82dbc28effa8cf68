"""The event loop: the client's sends and cancellations, engine steps, and stretches of steps
without events run at once.

Time moves step by step: before each step the requests sent (and cancelled) by then reach the
engine (through the API server's queue when ``StepCosts.frontend_s`` is set: one request at a time, so
requests sent together reach the engine spread out, as a real server's do), the scheduler decides the step, the step-time model says how long it takes, and the
requests that ended set off the client's next sends (a freed concurrency slot, a session's next
turn after its think time, the next static wave). An idle engine jumps to the next send. A
cancellation reaches the engine between steps: the request frees its blocks, and the client
keeps only the tokens that came before it closed the request.

Fast-forward: after a step of decodes only, the steps up to the next event (a request needing a
KV block or ending, a send, a cancellation) differ only by their summed context, so their times
are computed in one vectorised pass with the same arithmetic as one step's, and give the same
times as stepping one by one (``fast_forward=False``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from engine.whatif.serving.client import Arrivals, Client, resolved_kind
from engine.whatif.serving.clock import TokenClock
from engine.whatif.serving.config import DoesNotFit, KvCapacity, Served, ServerConfig, blocks_needed, kv_capacity
from engine.whatif.serving.hashes import extend, output_ids
from engine.whatif.serving.requests import SimRequest
from engine.whatif.serving.result import RequestOutcome, SimResult, run_stats
from engine.whatif.serving.scheduler import DONE, Live, Scheduler, Step, truncate
from engine.whatif.serving.steptime import StepCosts, StepModel

_STRETCH = 1024  # steps computed per vectorised pass
_MIN_STRETCH = 24  # shorter stretches are cheaper stepped one by one (numpy's per-call cost)


def simulate(
    requests: Sequence[SimRequest],
    config: ServerConfig,
    served: Served,
    costs: StepCosts | None = None,
    arrivals: Arrivals | None = None,
    *,
    seed: int | None = None,
    fast_forward: bool = True,
) -> SimResult:
    """Serve ``requests`` (plan order) on ``config`` for ``served`` under ``costs``, sent as
    ``arrivals`` says; ``seed`` draws speculative decoding's acceptances (default: the arrivals'
    seed). :class:`~engine.whatif.serving.config.DoesNotFit` when the plan cannot run."""
    arrivals = arrivals or Arrivals()
    capacity = kv_capacity(config, served)
    model = StepModel(served, config.tensor_parallel, costs or StepCosts())
    sim = _Simulation(requests, config, capacity.num_blocks, model, arrivals, seed, fast_forward)
    sim.run()
    return sim.result(capacity, resolved_kind(requests, arrivals) in ("poisson", "gamma", "trace"))


def _check(requests: Sequence[SimRequest], config: ServerConfig, num_blocks: int) -> None:
    for i, r in enumerate(requests):
        if r.index != i:
            raise ValueError(f"the request at position {i} has index {r.index}: number them 0, 1, 2 ... in plan order")
        if r.block_size != config.block_size and not r.later_turn:
            raise ValueError(
                f"request {r.index} was hashed in blocks of {r.block_size} tokens; the server's are {config.block_size}"
            )
        if not r.later_turn:
            _check_fits(r.index, r.prompt_tokens, r.output_tokens, config, num_blocks)


def _check_fits(index: int, prompt: int, output: int, config: ServerConfig, num_blocks: int) -> None:
    need = blocks_needed(prompt, output, config)
    if need > num_blocks:
        raise DoesNotFit(
            f"request {index}: {prompt} prompt + {output} output tokens need {need} KV blocks of "
            f"{config.block_size} tokens; the server holds {num_blocks}"
        )
    if not config.chunking and not config.static_batches and prompt + output - 1 > config.max_num_batched_tokens:
        raise DoesNotFit(
            f"request {index}: {prompt} prompt + {output} output tokens exceed max_num_batched_tokens "
            f"{config.max_num_batched_tokens} without chunked prefill"
        )


class _Simulation:
    """One simulated phase: the client, the engine, the clock and the steps so far."""

    def __init__(
        self,
        requests: Sequence[SimRequest],
        config: ServerConfig,
        num_blocks: int,
        model: StepModel,
        arrivals: Arrivals,
        seed: int | None,
        fast_forward: bool,
    ) -> None:
        _check(requests, config, num_blocks)
        self.requests, self.config, self.num_blocks, self.model = requests, config, num_blocks, model
        self.clock = TokenClock(config.spec_tokens, config.spec_acceptance, arrivals.seed if seed is None else seed)
        self.sched = Scheduler(config, num_blocks, self.clock)
        self.client = Client(requests, arrivals)
        self.fast_forward = fast_forward
        self.lives: list[Live | None] = [None] * len(requests)
        self.sends: list[tuple[float, int]] = []
        self.cancels: list[tuple[float, int]] = []
        self.ingest: list[tuple[float, float, int]] = []  # (reaches the engine, sent, request): the API server's
        self.front_free = 0.0  # when the API server has handed over the requests before
        self.frontend_s = model.costs.frontend_s
        self.now, self.g, self.fast_steps = 0.0, 0, 0
        self.ends: list[float] = []
        self.tokens: list[int] = []
        self.seqs: list[int] = []

    def run(self) -> None:
        self._push(self.client.start())
        sched = self.sched
        while True:
            self._events()
            if not sched.running and not sched.waiting:
                arrival = self._next_arrival()
                if arrival == math.inf:
                    return
                self.now = max(self.now, arrival)
                continue
            step = sched.schedule(self.g)
            if step.seqs == 0:
                if not step.preempted:
                    raise RuntimeError(f"the simulated engine is stuck at step {self.g} with work waiting")
                continue  # everything was preempted: the next step admits again
            self._step(step)
            if self.fast_forward and step.decode_only:
                self._stretch()

    # -- the client ----------------------------------------------------------------------------

    def _push(self, sends: list[tuple[float, int]]) -> None:
        for send in sends:
            heapq.heappush(self.sends, send)

    def _next_arrival(self) -> float:
        """When the next request is sent, or reaches the engine from the API server's queue."""
        return min(self.sends[0][0] if self.sends else math.inf, self.ingest[0][0] if self.ingest else math.inf)

    def _events(self) -> None:
        """Sends, requests reaching the engine and cancellations up to now, in time order (an ended request
        may send another)."""
        sends, cancels, ingest = self.sends, self.cancels, self.ingest
        while True:
            t_send = sends[0][0] if sends else math.inf
            t_cancel = cancels[0][0] if cancels else math.inf
            t_in = ingest[0][0] if ingest else math.inf
            if min(t_send, t_cancel, t_in) > self.now:
                return
            if t_in <= min(t_send, t_cancel):
                _, sent, i = heapq.heappop(ingest)
                self._send(sent, i)
            elif t_send <= t_cancel:
                self._sent(*heapq.heappop(sends))
            else:
                self._cancel(*heapq.heappop(cancels))

    def _sent(self, t: float, i: int) -> None:
        """A client's send: to the engine at once, or through the API server's queue, which hands requests over
        one at a time, ``frontend_s`` each (requests sent together reach the engine spread out)."""
        if self.frontend_s <= 0:
            self._send(t, i)
            return
        self.front_free = max(t, self.front_free) + self.frontend_s
        heapq.heappush(self.ingest, (self.front_free, t, i))

    def _send(self, t: float, i: int) -> None:
        req = self.requests[i]
        if req.later_turn:
            prompt, hashes, state = self._turn_prompt(req, i)
        else:
            prompt, hashes, state = req.prompt_tokens, req.block_hashes.tolist(), req.prompt_state
        live = Live(req, prompt, hashes, state, t)
        live.keep_outputs = self.client.next_turn(i) is not None
        self.lives[i] = live
        if live.cancel_s is not None:
            heapq.heappush(self.cancels, (live.cancel_s, i))
        self.sched.waiting.append(live)

    def _turn_prompt(self, req: SimRequest, i: int) -> tuple[int, list[int], int]:
        """A later turn's prompt: the previous turn's prompt and received reply, then its new message."""
        j = self.client.previous_turn(i)
        before = None if j is None else self.lives[j]
        own = req.turn_ids if req.turn_ids is not None else np.zeros(0, dtype=np.int64)
        if before is None:  # a session whose first turn is not in the plan
            ids, base, start, state0 = own, [], 0, 0
        else:
            ids = np.concatenate((output_ids(before.req.index, self._received(before)), own.astype(np.uint64)))
            base, start, state0 = before.hashes[: before.n_prompt_hashes], before.prompt, before.state_hash
            before.hashes = []  # not needed any more
        prompt = start + len(ids)
        if prompt < 1:
            raise ValueError(f"request {i}: a later turn without tokens of its own and no turn before it")
        _check_fits(i, prompt, req.output_tokens, self.config, self.num_blocks)
        tail, state = extend(state0, start, ids, self.config.block_size)
        return prompt, base + tail.tolist(), state

    def _received(self, live: Live) -> int:
        tokens = sum(1 + self.clock.cum(e) - self.clock.cum(p + 1) for p, e in live.runs)
        return min(tokens, live.req.output_tokens)

    def _cancel(self, c: float, i: int) -> None:
        live = self.lives[i]
        if live is None or live.state == DONE:
            return
        self.sched.cancel(live, self.g, c)
        if self.g and self.now > c:
            truncate(live, self.g - 1)  # the last step ended after the client closed it
        self._push(self.client.ended(i, c))

    # -- steps ---------------------------------------------------------------------------------

    def _step(self, step: Step) -> None:
        dt = self.model.time(
            step.seqs, step.prefill_tokens, step.decode_tokens, step.logits, step.context, step.pairs2,
            step.arrivals, step.outputs,
        )  # fmt: skip
        end = self.now + dt
        self.ends.append(end)
        self.tokens.append(step.prefill_tokens + step.decode_tokens)
        self.seqs.append(step.seqs)
        ended = self.sched.commit(step, self.g, end)
        self.g += 1
        self.now = end
        for live in ended:
            if live.cancel_s is not None and live.cancel_s < end:  # closed before its last tokens came
                truncate(live, self.g - 1)
                live.cancelled, live.end_s = True, live.cancel_s
            self._push(self.client.ended(live.req.index, live.end_s))

    def _stretch(self) -> None:
        """The decode-only steps before the next event, at once: up to a request's last token, a
        send or a cancellation, or a KV block that cannot be had without preempting (the blocks
        decodes need on the way are allocated in the order steps would allocate them)."""
        t_next = min(self._next_arrival(), self.cancels[0][0] if self.cancels else math.inf)
        while True:
            hi = min(self.sched.finish_bound(), self.g + _STRETCH)
            last = self.ends[-1] - (self.ends[-2] if len(self.ends) > 1 else 0.0)
            if hi - self.g < _MIN_STRETCH or t_next - self.now < _MIN_STRETCH * last:
                return
            ends = self._decode_ends(hi - self.g)
            starts = np.concatenate(([self.now], ends[:-1]))
            m = int(np.searchsorted(starts, t_next, side="left"))  # steps that start before the next event
            m = self.sched.grow_until(self.g + m) - self.g
            if m <= 0:
                return
            n_dec, k1 = self.sched.n_dec, self.config.tokens_per_decode
            self.ends.extend(ends[:m].tolist())
            self.tokens.extend([n_dec * k1] * m)
            self.seqs.extend([n_dec] * m)
            self.g += m
            self.fast_steps += m
            self.now = float(ends[m - 1])
            if m < len(ends):
                return

    def _decode_ends(self, n: int) -> np.ndarray:
        """End times of the next ``n`` steps if they are all the current decodes' (as :meth:`_step`'s sums)."""
        sched, clock, k1, a = self.sched, self.clock, self.config.tokens_per_decode, self.g
        n_dec = sched.n_dec
        dec_ctx = sched.ctx_base + n_dec * clock.cum_range(a, a + n)
        context = dec_ctx + n_dec * k1
        pairs2 = 2 * k1 * dec_ctx + n_dec * k1 * (k1 + 1)
        outputs = n_dec * clock.per_step_range(a, a + n)
        dt = self.model.times(n_dec, n_dec * k1, n_dec * k1, context, pairs2, outputs)
        return np.cumsum(np.concatenate(([self.now], dt)))[1:]

    # -- the result ----------------------------------------------------------------------------

    def result(self, capacity: KvCapacity, due_times: bool) -> SimResult:
        ends = np.asarray(self.ends, dtype=float)
        outcomes = [self._outcome(live) for live in self.lives if live is not None]
        counts = {
            "fast_forwarded": self.fast_steps,
            "preemptions": self.sched.preemptions,
            "queries": self.sched.queries,
            "hits": self.sched.hits,
            "peak_blocks": self.sched.pool.peak,
        }
        duration = max((o.end_s for o in outcomes), default=0.0)
        tokens, seqs = np.asarray(self.tokens, dtype=np.int64), np.asarray(self.seqs, dtype=np.int64)
        stats = run_stats(tokens, seqs, duration, counts, self.num_blocks)
        steps_yield = self.clock.per_step_range(0, len(ends))
        return SimResult(outcomes, ends, tokens, seqs, steps_yield, stats, capacity, due_times)

    def _outcome(self, live: Live) -> RequestOutcome:
        req = live.req
        due = live.send_s if req.later_turn else float(self.client.due[req.index])
        return RequestOutcome(
            index=req.index,
            due_s=due,
            send_s=live.send_s,
            prompt_tokens=live.prompt,
            requested_output_tokens=req.output_tokens,
            output_tokens=self._received(live),
            cached_prompt_tokens=live.cached_tokens,
            preemptions=live.preemptions,
            cancelled=live.cancelled,
            end_s=live.end_s,
            runs=tuple(live.runs),
            session=req.session,
            turn=req.turn,
        )
