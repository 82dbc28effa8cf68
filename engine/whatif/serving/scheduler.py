"""One engine step's scheduling, with the semantics of vLLM v1's scheduler.

Each step: the running requests first, in the order they were admitted (decodes, then the next
chunk of a prompt being prefilled); a running request that needs a KV block when none is free
preempts the most recently admitted running request (recompute: its blocks are freed, it goes
back to the front of the waiting queue and will compute its prompt and the outputs so far again,
less what the prefix cache still holds), itself last. Then, unless the step preempted, the
waiting requests in arrival order while seats (``max_num_seqs``) and the token budget
(``max_num_batched_tokens``) remain and their blocks can be allocated: the longest cached prefix
first (never the whole prompt: at least one token is computed), then a chunk of the rest (the
whole rest without chunked prefill, or the request waits). A step that completes a prompt samples
its first token; a decode step yields one token per running request (with speculative decoding,
``1 + accepted``: :mod:`engine.whatif.serving.clock`).

Decoding requests are kept in aggregate: each one's tokens are a function of the step number,
so a step costs work only for the requests with an event in it (a prompt chunk, a new KV block,
a last token), and the simulator can run a stretch of steps without events at once. Under the
budget check of :class:`~engine.whatif.serving.config.ServerConfig` every decode fits a step, and
a request is prefilled over several steps only when it was admitted last; so the running order
is all decodes, then at most one prompt being prefilled.
"""

from __future__ import annotations

import heapq
from collections import deque

from engine.whatif.serving.clock import TokenClock
from engine.whatif.serving.config import ServerConfig
from engine.whatif.serving.hashes import extend, output_ids
from engine.whatif.serving.kv import BlockPool
from engine.whatif.serving.requests import SimRequest

WAITING, PREFILL, DECODE, DONE = range(4)


class Live:
    """One sent request's state in the engine (mutable: the simulator's hot path)."""

    __slots__ = (
        "req", "prompt", "hashes", "n_prompt_hashes", "state_hash", "keep_outputs", "send_s", "cancel_s",
        "state", "seq", "num_prompt", "computed", "out", "blocks", "n_cached", "dec_from", "ev_block",
        "ev_finish", "run_start", "runs", "end_s", "cancelled", "preemptions", "cached_tokens", "admitted",
    )  # fmt: skip

    def __init__(self, req: SimRequest, prompt: int, hashes: list[int], state_hash: int, send_s: float) -> None:
        self.req = req
        self.prompt = prompt  # prompt tokens (a later turn's: the conversation so far)
        self.hashes = hashes  # hashes of its full blocks: the prompt's, then outputs' after a preemption
        self.n_prompt_hashes = len(hashes)
        self.state_hash = state_hash  # the prompt's own hash, to extend with outputs
        self.keep_outputs = False  # a later turn follows: its output blocks stay findable
        self.send_s = send_s
        self.cancel_s: float | None = None if req.cancel_after_s is None else send_s + req.cancel_after_s
        self.state = WAITING
        self.seq = -1  # admission order (running order), new on each admission
        self.num_prompt = prompt  # tokens to compute before sampling: prompt + outputs so far
        self.computed = 0  # decoding: at step dec_from
        self.out = 0  # outputs; decoding: at step dec_from
        self.blocks: list[int] = []
        self.n_cached = 0  # its blocks registered in the cache
        self.dec_from = self.ev_block = self.ev_finish = self.run_start = 0
        self.runs: list[tuple[int, int]] = []  # (step of a prompt's last chunk, end step): tokens came out
        self.end_s = 0.0
        self.cancelled = False
        self.preemptions = 0
        self.cached_tokens = 0  # prompt tokens found in the prefix cache at its first admission
        self.admitted = False


class Step:
    """One scheduled step: its prompt chunks, decodes, last tokens, and its summary for the step time."""

    __slots__ = (
        "prefills", "finishing", "preempted", "arrivals", "n_dec", "seqs", "prefill_tokens", "decode_tokens",
        "logits", "context", "pairs2", "outputs",
    )  # fmt: skip

    def __init__(self) -> None:
        self.prefills: list[tuple[Live, int, int]] = []  # (request, tokens computed before, chunk)
        self.finishing: list[tuple[Live, int]] = []  # (request, tokens its last chunk carries)
        self.preempted = False
        self.arrivals = 0
        self.n_dec = self.seqs = self.prefill_tokens = self.decode_tokens = 0
        self.logits = self.context = self.pairs2 = self.outputs = 0

    @property
    def decode_only(self) -> bool:
        """Only decodes that go on: the next steps look the same until an event."""
        return not (self.prefills or self.finishing or self.preempted) and self.n_dec > 0


class Scheduler:
    """The engine's queues, KV pool and decoding aggregate; :meth:`schedule` then :meth:`commit` per step."""

    def __init__(self, config: ServerConfig, num_blocks: int, clock: TokenClock) -> None:
        self.k1 = config.tokens_per_decode
        self.k = config.spec_tokens
        self.bs = config.block_size
        self.max_seqs = config.max_num_seqs
        self.budget = config.token_budget
        self.chunked = config.chunking
        self.static = config.static_batches
        self.pool = BlockPool(num_blocks, config.prefix_caching)
        self.clock = clock
        self.waiting: deque[Live] = deque()
        self.running: dict[int, Live] = {}  # by admission order
        self.prefilling: dict[int, Live] = {}
        self.n_dec = 0
        self.ctx_base = 0  # sum of decoding requests' computed tokens at step s: ctx_base + n_dec * C[s]
        self._blk: list[tuple[int, int, Live]] = []  # (step, seq, request): it needs a block at that step
        self._fin: list[tuple[int, int, Live]] = []  # (step, seq, request): its last token comes out of it
        self._seq = 0
        self.preemptions = 0
        self.queries = self.hits = 0  # prefix cache, in tokens

    # -- the decoding aggregate ----------------------------------------------------------------

    def computed_at(self, live: Live, s: int) -> int:
        """Tokens in a decoding request's KV before step ``s``."""
        return live.computed + self.clock.cum(s) - self.clock.cum(live.dec_from)

    def out_at(self, live: Live, s: int) -> int:
        """A decoding request's outputs before step ``s``."""
        return live.out + self.clock.cum(s) - self.clock.cum(live.dec_from)

    def _start_decode(self, live: Live, s: int) -> None:
        live.state, live.dec_from = DECODE, s
        self.n_dec += 1
        self.ctx_base += live.computed - self.clock.cum(s)
        self._push_block(live)
        target = live.req.output_tokens - live.out + self.clock.cum(s)
        live.ev_finish = self.clock.first_reaching(target, s + 1) - 1
        heapq.heappush(self._fin, (live.ev_finish, live.seq, live))

    def _push_block(self, live: Live) -> None:
        target = len(live.blocks) * self.bs - self.k - live.computed + self.clock.cum(live.dec_from)
        live.ev_block = self.clock.first_reaching(target, live.dec_from)
        heapq.heappush(self._blk, (live.ev_block, live.seq, live))

    def _stop_decode(self, live: Live, s: int) -> None:
        """Out of the aggregate, with its computed tokens and outputs as of step ``s``."""
        self.n_dec -= 1
        self.ctx_base -= live.computed - self.clock.cum(live.dec_from)
        live.computed, live.out = self.computed_at(live, s), self.out_at(live, s)

    def finish_bound(self) -> int:
        """No decoding request ends before this step (the earliest in the queue of last tokens)."""
        return self._fin[0][0] if self._fin else 1 << 62

    def grow_until(self, end: int) -> int:
        """Allocate the blocks decodes need at steps before ``end``, in step and running order, as
        long as no preemption is needed; the step that would need one (``end`` if none)."""
        heap = self._blk
        while heap and heap[0][0] < end:
            entry = heapq.heappop(heap)
            if not _valid(entry, "ev_block"):
                continue
            s, _, live = entry
            need = -(-(self.computed_at(live, s) + self.k1) // self.bs) - len(live.blocks)
            if not self.pool.can_allocate(need):
                heapq.heappush(heap, entry)
                return s
            live.blocks.extend(self.pool.allocate(need))
            self._push_block(live)
        return end

    # -- one step ------------------------------------------------------------------------------

    def schedule(self, g: int) -> Step:
        """Step ``g``'s decisions: running requests first, then waiting ones (unless it preempted)."""
        step = Step()
        batch_open = not self.running
        self._grow_decodes(g, step)
        used = self._continue_prefills(g, step)
        if not step.preempted and (batch_open or not self.static):
            self._admit(step, self.budget - self.n_dec * self.k1 - used)
        for live, _ in self._pop_due(self._fin, "ev_finish", g):
            step.finishing.append((live, live.req.output_tokens - self.out_at(live, g)))
        self._summarise(g, step)
        return step

    def _pop_due(self, heap: list[tuple[int, int, Live]], field: str, g: int) -> list[tuple[Live, int]]:
        due = []
        while heap and heap[0][0] <= g:
            entry = heapq.heappop(heap)
            if _valid(entry, field):
                due.append((entry[2], entry[1]))
        return due

    def _grow_decodes(self, g: int, step: Step) -> None:
        """Decodes that need a block now, in running order; out of blocks, preempt from the tail."""
        for live, _ in self._pop_due(self._blk, "ev_block", g):
            if live.state != DECODE:
                continue  # preempted meanwhile, as the tail
            need = -(-(self.computed_at(live, g) + self.k1) // self.bs) - len(live.blocks)
            if self._make_room(live, need, g, step):
                live.blocks.extend(self.pool.allocate(need))
                self._push_block(live)

    def _make_room(self, live: Live, need: int, g: int, step: Step) -> bool:
        """Preempt the last admitted running requests until ``need`` blocks are free; False when
        ``live`` itself had to go."""
        while not self.pool.can_allocate(need):
            victim = self.running[next(reversed(self.running))]
            self.preempt(victim, g)
            step.preempted = True
            if victim is live:
                return False
        return True

    def _continue_prefills(self, g: int, step: Step) -> int:
        used = 0
        for live in list(self.prefilling.values()):
            left = self.budget - self.n_dec * self.k1 - used
            if live.state != PREFILL:
                continue  # preempted meanwhile, as the tail
            if left <= 0:
                break
            chunk = min(live.num_prompt - live.computed, left)
            need = -(-(live.computed + chunk) // self.bs) - len(live.blocks)
            if not self._make_room(live, need, g, step):
                break
            live.blocks.extend(self.pool.allocate(need))
            self._register(live, live.computed + chunk)
            step.prefills.append((live, live.computed, chunk))
            used += chunk
        return used

    def _admit(self, step: Step, left: int) -> None:
        while self.waiting and left > 0 and len(self.running) < self.max_seqs:
            live = self.waiting[0]
            hits = self.pool.lookup(live.hashes, (live.num_prompt - 1) // self.bs)
            hit_tokens = len(hits) * self.bs
            new = live.num_prompt - hit_tokens
            if not self.chunked and new > left:
                return
            chunk = min(new, left)
            need = -(-(hit_tokens + chunk) // self.bs) - len(hits)
            if not self.pool.can_allocate(need, hits):
                return
            self.waiting.popleft()
            live.blocks = self.pool.take(hits, need)
            self.queries += live.num_prompt
            self.hits += hit_tokens
            self._seq += 1
            live.seq, live.state, live.computed, live.n_cached = self._seq, PREFILL, hit_tokens, len(hits)
            self.running[live.seq] = self.prefilling[live.seq] = live
            self._register(live, hit_tokens + chunk)
            step.prefills.append((live, hit_tokens, chunk))
            if not live.admitted:
                live.admitted, live.cached_tokens = True, hit_tokens
                step.arrivals += 1
            left -= chunk

    def _register(self, live: Live, tokens: int) -> None:
        """Register the blocks full after ``tokens`` tokens (as vLLM caches them when scheduled)."""
        if not self.pool.caching:
            return
        upto = min(tokens // self.bs, len(live.hashes))
        for i in range(live.n_cached, upto):
            self.pool.register(live.blocks[i], live.hashes[i])
        live.n_cached = max(live.n_cached, upto)

    def _summarise(self, g: int, step: Step) -> None:
        n, k1 = self.n_dec, self.k1
        dec_ctx = self.ctx_base + n * self.clock.cum(g)
        u = self.clock.per_step(g) if n else 0
        pre_tokens = pre_ctx = pre_pairs2 = completions = 0
        for live, before, chunk in step.prefills:
            pre_tokens += chunk
            pre_ctx += before + chunk
            pre_pairs2 += chunk * (2 * before + chunk + 1)
            completions += int(before + chunk == live.num_prompt)
        overshoot = sum(u - last for _, last in step.finishing)
        step.n_dec = n
        step.seqs = n + len(step.prefills)
        step.prefill_tokens = pre_tokens
        step.decode_tokens = n * k1
        step.logits = n * k1 + completions
        step.context = dec_ctx + n * k1 + pre_ctx
        step.pairs2 = 2 * k1 * dec_ctx + n * k1 * (k1 + 1) + pre_pairs2
        step.outputs = n * u - overshoot + completions

    def commit(self, step: Step, g: int, end_s: float) -> list[Live]:
        """Step ``g`` has ended at ``end_s``: prompts completed sample a token, last tokens end
        their requests. The requests that ended."""
        ended: list[Live] = []
        for live, before, chunk in step.prefills:
            live.computed = before + chunk
            if live.computed < live.num_prompt:
                continue
            del self.prefilling[live.seq]
            live.out += 1
            live.run_start = g
            if live.out < live.req.output_tokens:
                self._start_decode(live, g + 1)
                continue
            live.runs.append((g, g + 1))
            self._end(live, end_s, live.computed)
            ended.append(live)
        for live, _ in step.finishing:
            self._stop_decode(live, g + 1)
            live.out = live.req.output_tokens  # its last chunk may carry fewer than the step yields
            live.runs.append((live.run_start, g + 1))
            self._end(live, end_s, live.prompt + live.out - 1)  # all but the last token went through the model
            ended.append(live)
        return ended

    # -- leaving -------------------------------------------------------------------------------

    def _end(self, live: Live, end_s: float, computed: int) -> None:
        del self.running[live.seq]
        if live.keep_outputs:
            self._register_outputs(live, computed)
        else:
            live.hashes = []  # nobody looks them up again
        self.pool.release(live.blocks)
        live.blocks, live.state, live.end_s = [], DONE, end_s

    def _register_outputs(self, live: Live, computed: int) -> None:
        """Hash its outputs' blocks (pseudo token ids) and register those whose KV was computed."""
        if not self.pool.caching:
            return
        tail, _ = extend(live.state_hash, live.prompt, output_ids(live.req.index, live.out), self.bs)
        live.hashes = live.hashes[: live.n_prompt_hashes] + tail.tolist()
        self._register(live, computed)

    def preempt(self, live: Live, g: int) -> None:
        """Recompute preemption before step ``g``: blocks freed, back to the waiting queue's front."""
        del self.running[live.seq]
        if live.state == PREFILL:
            del self.prefilling[live.seq]
        else:
            self._stop_decode(live, g)
            live.runs.append((live.run_start, g))
            self._register_outputs(live, live.computed)
        self.pool.release(live.blocks)
        live.blocks, live.n_cached, live.computed, live.state = [], 0, 0, WAITING
        live.num_prompt = live.prompt + live.out
        live.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(live)

    def cancel(self, live: Live, g: int, end_s: float) -> None:
        """The client closed it at ``end_s``; the engine lets it go before step ``g``."""
        if live.state == WAITING:
            self.waiting.remove(live)
            live.state, live.end_s = DONE, end_s
        else:
            if live.state == PREFILL:
                del self.prefilling[live.seq]
            else:
                self._stop_decode(live, g)
                live.runs.append((live.run_start, g))
            self._end(live, end_s, live.computed)
        live.cancelled = True


def truncate(live: Live, g: int) -> None:
    """Drop the tokens of steps ``g`` on (the client had closed the request before they came)."""
    live.runs = [(p, min(e, g)) for p, e in live.runs if p < g]


def _valid(entry: tuple[int, int, Live], field: str) -> bool:
    step, seq, live = entry
    return live.seq == seq and live.state == DECODE and getattr(live, field) == step
