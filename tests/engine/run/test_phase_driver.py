"""The serving load driver: arrival processes, concurrency, queueing, achieved rate (no model)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from engine.backends.base import Request, RequestError, Sender
from engine.measure.records import RequestRecord
from engine.run.driver import arrival_offsets_s, drive_phase, slo_of
from engine.run.plan import planned
from engine.run.sources.synthetic import prompt_lengths, synthetic_prompts
from engine.spec import SpecError, Workload, parse_job_spec
from engine.spec.sources.synthetic import SyntheticTraffic


def plan(prompts: list[list[int]], n: int = 4):  # type: ignore[no-untyped-def]
    return planned(prompts, n)


class FakeStreaming(Sender):
    """Streams ``max_new_tokens`` chunks ``gap_s`` apart on its own loop; tracks concurrency."""

    def __init__(self, gap_s: float = 0.002) -> None:
        self.loop = asyncio.new_event_loop()
        self.gap_s = gap_s
        self.in_flight = 0
        self.peak = 0

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    async def stream(self, batch: list[Request], records: list[RequestRecord]) -> None:
        await asyncio.gather(*(self._one(r, rec) for r, rec in zip(batch, records, strict=True)))

    async def _one(self, request: Request, record: RequestRecord) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            prompt = request.prompt
            if prompt and prompt[0] < 0:
                raise RequestError("refused")
            if prompt and prompt[0] == 999:
                raise RuntimeError("engine died")
            for _ in range(request.max_new_tokens):
                await asyncio.sleep(self.gap_s)
                record.add_chunk(time.perf_counter_ns(), 1)
        finally:
            self.in_flight -= 1


class FakeSync(Sender):
    """A transformers-like backend: one batch at a time, blocking its loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    async def stream(self, batch: list[Request], records: list[RequestRecord]) -> None:
        send = time.perf_counter_ns()
        for _ in range(batch[0].max_new_tokens):
            time.sleep(0.001)
            for rec in records:
                rec.add_chunk(time.perf_counter_ns(), 1)
        for rec in records:
            rec.send_ns = send


def test_offsets_are_seeded_and_hit_the_mean_rate() -> None:
    a = arrival_offsets_s(200, "poisson", rate=5.0, seed=3)
    b = arrival_offsets_s(200, "poisson", rate=5.0, seed=3)
    c = arrival_offsets_s(200, "poisson", rate=5.0, seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.all(np.diff(a) > 0) and a[0] > 0
    assert a[-1] == pytest.approx(200 / 5.0)  # vLLM's normalisation: n requests over n/rate seconds


def test_gamma_burstiness_sets_the_spread_of_gaps() -> None:
    poisson = np.diff(arrival_offsets_s(4000, "poisson", rate=10.0, seed=0))
    bursty = np.diff(arrival_offsets_s(4000, "gamma", rate=10.0, burstiness=0.25, seed=0))
    smooth = np.diff(arrival_offsets_s(4000, "gamma", rate=10.0, burstiness=16.0, seed=0))
    cv = lambda g: g.std() / g.mean()  # noqa: E731  (gamma: 1/sqrt(shape))
    assert cv(poisson) == pytest.approx(1.0, abs=0.08)
    assert cv(bursty) == pytest.approx(2.0, abs=0.2)
    assert cv(smooth) == pytest.approx(0.25, abs=0.03)


@pytest.mark.parametrize("arrival", ["concurrency", "max", "batch"])
def test_closed_loops_are_due_at_once(arrival: str) -> None:
    assert not arrival_offsets_s(5, arrival, rate=None).any()


def test_prompt_length_distributions() -> None:
    fixed = SyntheticTraffic(prompt_tokens=100)
    assert prompt_lengths(fixed, 0, 3) == [100, 100, 100]
    uni = SyntheticTraffic(prompt_tokens=100, prompt_length="uniform", prompt_length_spread=0.5)
    lengths = prompt_lengths(uni, 1, 500)
    assert min(lengths) >= 50 and max(lengths) <= 150 and len(set(lengths)) > 50
    assert prompt_lengths(uni, 1, 500) == lengths  # seeded
    normal = prompt_lengths(
        SyntheticTraffic(prompt_tokens=10, prompt_length="normal", prompt_length_spread=1.0), 0, 300
    )
    assert min(normal) >= 1
    prompts = synthetic_prompts(uni, 1, 20, None, vocab_size=1000)
    assert [len(p) for p in prompts] == prompt_lengths(uni, 1, 20)


def test_poisson_load_keeps_the_configured_rate() -> None:
    backend = FakeStreaming()
    wl = Workload(requests=40, arrival="poisson", rate=100.0, seed=2)
    result = drive_phase(backend, plan([[1]] * 40), wl)
    stats = result.stats
    assert stats["configured_rate"] == 100.0 and stats["scheduled_rate"] == pytest.approx(100.0)
    assert stats["achieved_rate"] == pytest.approx(100.0, rel=0.15)
    queues_ms = [(r.send_ns - r.arrival_ns) / 1e6 for r in result.records]
    assert min(queues_ms) >= 0 and np.median(queues_ms) < 5  # nothing waits for a slot
    assert all(r.output_tokens == 4 and r.ok for r in result.records)


def test_max_concurrency_bounds_in_flight_and_records_queueing() -> None:
    backend = FakeStreaming(gap_s=0.003)
    wl = Workload(requests=12, arrival="concurrency", max_concurrency=3)
    result = drive_phase(backend, plan([[1]] * 12), wl)
    assert backend.peak == 3 and result.stats["peak_concurrency"] == 3
    queued = sorted((r.send_ns - r.arrival_ns) / 1e6 for r in result.records)
    assert queued[:3] == pytest.approx([0, 0, 0], abs=5) and queued[-1] > 20  # last ones waited ~3 rounds
    assert len({r.arrival_ns for r in result.records}) == 1


class FakeConnecting(FakeStreaming):
    """An HTTP-like backend: says how many connections each phase asked to have open before it started."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[int] = []

    async def open_connections(self, n: int) -> None:
        self.opened.append(n)


@pytest.mark.parametrize(
    ("workload", "opened"),
    [
        (Workload(requests=12, arrival="concurrency", max_concurrency=3), [3]),
        (Workload(requests=2, arrival="concurrency", max_concurrency=8), [2]),
        (Workload(requests=6, arrival="batch", batch_size=4), [4]),
        (Workload(requests=6, arrival="max"), []),  # no bound: as many as are due, opened as they go
        (Workload(requests=6, arrival="poisson", rate=500.0, max_concurrency=3), []),  # due one by one
    ],
)
def test_connections_are_opened_before_a_phase_whose_requests_are_due_at_once(workload, opened) -> None:
    backend = FakeConnecting()
    drive_phase(backend, plan([[1]] * workload.requests), workload, warmup=True)
    assert backend.opened == []  # a warm-up's timing is not measured
    drive_phase(backend, plan([[1]] * workload.requests), workload)
    assert backend.opened == opened


def test_max_sends_everything_at_once_and_failures_are_records() -> None:
    backend = FakeStreaming()
    wl = Workload(requests=6, arrival="max")
    result = drive_phase(backend, plan([[1], [-1], [1], [1], [-1], [1]]), wl)
    assert backend.peak >= 4  # all sent at once (the refused ones leave at once)
    errors = [r.error for r in result.records]
    assert errors.count("refused") == 2 and errors.count(None) == 4


def test_only_request_errors_are_per_request_anything_else_ends_the_phase() -> None:
    backend = FakeStreaming(gap_s=0.01)
    wl = Workload(requests=4, arrival="max")
    with pytest.raises(RuntimeError, match="engine died"):
        drive_phase(backend, plan([[1], [999], [1], [1]]), wl)
    assert backend.in_flight == 0  # the other requests were cancelled, not left running


def test_batch_arrival_sends_batches_in_turn_and_queues_from_the_phase_start() -> None:
    backend = FakeStreaming()
    wl = Workload(requests=6, batch_size=2)
    result = drive_phase(backend, plan([[1]] * 6), wl)
    assert backend.peak == 2
    assert (
        len({r.arrival_ns for r in result.records})
        == 1
        == len({result.start_ns} | {r.arrival_ns for r in result.records})
    )
    sends = [r.send_ns for r in result.records]
    assert sends[0] <= sends[1] < sends[2] <= sends[3] < sends[4]  # batches in turn
    queued = [r.send_ns - r.arrival_ns for r in result.records]
    assert queued[4] > queued[2] > queued[0]  # later batches waited for the earlier ones, as in transformers


def test_warmup_ignores_the_arrival_process() -> None:
    backend = FakeStreaming()
    wl = Workload(requests=4, arrival="poisson", rate=0.5)  # 8 s if it were honoured
    t0 = time.perf_counter()
    result = drive_phase(backend, plan([[1]] * 4), wl, warmup=True)
    assert time.perf_counter() - t0 < 2 and all(r.warmup for r in result.records)


def test_sync_backends_serve_one_at_a_time_and_queue() -> None:
    wl = Workload(requests=5, arrival="poisson", rate=1000.0)
    result = drive_phase(FakeSync(), plan([[1]] * 5), wl)
    assert all(r.output_tokens == 4 for r in result.records)
    assert result.records[-1].send_ns - result.records[-1].arrival_ns > 5e6  # waited behind the others
    assert result.stats["peak_concurrency"] == 1


def test_workload_validation() -> None:
    with pytest.raises(SpecError, match="needs a rate"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"arrival": "poisson"}})
    with pytest.raises(SpecError, match="needs max_concurrency"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"arrival": "concurrency"}})
    with pytest.raises(SpecError, match="burstiness applies to arrival=gamma"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"arrival": "poisson", "rate": 1, "burstiness": 2}})
    with pytest.raises(SpecError, match="batch_size is for arrival=batch"):
        parse_job_spec({"model": {"source": "demo"}, "workload": {"arrival": "max", "batch_size": 4}})


def test_serving_defaults_keep_fingerprints() -> None:
    plain = parse_job_spec({"model": {"source": "demo"}})
    explicit = parse_job_spec({"model": {"source": "demo"}, "workload": {"arrival": "batch", "burstiness": 1.0}})
    served = parse_job_spec({"model": {"source": "demo"}, "workload": {"arrival": "poisson", "rate": 2}})
    assert plain.fingerprint() == explicit.fingerprint() != served.fingerprint()
    assert "arrival" not in plain.fingerprint()  # a hash, not JSON
    assert slo_of(plain.workload) is None
    slo = slo_of(Workload(slo_ttft_ms=200, slo_e2el_ms=1000))
    assert slo is not None and slo.ttft_ms == 200 and slo.tpot_ms is None and slo.e2el_ms == 1000


def test_recipes_for_serving_engines() -> None:
    spec = parse_job_spec(
        {"model": {"source": "demo"}, "recipe": {"engine": "vllm-server", "max_num_seqs": 4, "speculative": "ngram"}}
    )
    assert "max_num_seqs=4" in spec.recipe.describe() and "ngram" in spec.recipe.describe()
    # vLLM in process builds random weights itself; the managed server needs real ones
    assert parse_job_spec({"model": {"source": "synthetic:smollm2-135m"}, "recipe": {"engine": "vllm"}})
    with pytest.raises(SpecError, match="synthetic weights run with engine vllm"):
        parse_job_spec({"model": {"source": "synthetic:smollm2-135m"}, "recipe": {"engine": "vllm-server"}})
    with pytest.raises(SpecError, match="draft model needs real weights"):
        parse_job_spec(
            {
                "model": {"source": "synthetic:smollm2-135m"},
                "recipe": {"engine": "vllm", "speculative": "draft", "speculative_model": "demo"},
            }
        )
    with pytest.raises(SpecError, match="needs speculative_model"):
        parse_job_spec({"model": {"source": "demo"}, "recipe": {"engine": "vllm", "speculative": "eagle"}})
    with pytest.raises(SpecError, match="base_url"):
        parse_job_spec(
            {
                "model": {"source": "demo"},
                "recipe": {"engine": "openai", "base_url": "localhost:8000", "model_name": "m"},
            }
        )


class Echo(FakeStreaming):
    """Replies with the number of messages it was sent (so a test sees the history grow)."""

    def __init__(self) -> None:
        super().__init__(gap_s=0.001)
        self.seen: list[tuple[int, ...]] = []

    async def _one(self, request: Request, record: RequestRecord) -> None:
        self.seen.append(tuple(request.prompt))
        if request.messages and request.messages[-1]["content"] == "fail":
            raise RequestError("refused")
        await super()._one(request, record)
        record.text = f"reply to {len(request.messages or ())} messages"


def _session_plan(contents: list[list[str]]):  # type: ignore[no-untyped-def]
    from engine.run.plan import PlannedRequest

    out = []
    for s, turns in enumerate(contents):
        for t, text in enumerate(turns):
            msg = ({"role": "user", "content": text},)
            out.append(
                PlannedRequest(Request(prompt=[t], max_new_tokens=2, messages=msg, want_text=True), session=s, turn=t)
            )
    return out


def _chat_ids(messages):  # type: ignore[no-untyped-def]
    return [len(messages)] + [len(m["content"]) for m in messages]


def test_sessions_send_turns_in_order_with_the_real_replies() -> None:
    backend = Echo()
    wl = Workload(requests=4, arrival="concurrency", max_concurrency=1)
    result = drive_phase(backend, _session_plan([["a", "bb"], ["c", "dd"]]), wl, chat_ids=_chat_ids)
    assert [r.session for r in result.records] == [0, 0, 1, 1] and [r.turn for r in result.records] == [0, 1, 0, 1]
    assert all(r.ok for r in result.records)
    # turn 1 carries turn 0's user message, the reply actually returned, and its own message
    assert backend.seen[1] == (3, 1, len("reply to 1 messages"), 2)
    first, second = result.records[0], result.records[1]
    assert second.arrival_ns >= first.chunk_ns[-1]  # due only after the reply ended
    assert result.records[2].send_ns >= second.chunk_ns[-1]  # one session at a time


def test_a_failed_turn_ends_its_session() -> None:
    wl = Workload(requests=3, arrival="max")
    result = drive_phase(Echo(), _session_plan([["a", "fail", "c"], ["x"]]), wl, chat_ids=_chat_ids)
    errors = [r.error for r in result.records]
    assert errors == [None, "refused", "not sent: turn 1 of this session failed", None]


def test_think_time_spaces_the_turns() -> None:
    wl = Workload(requests=2, arrival="max")
    result = drive_phase(Echo(), _session_plan([["a", "b", "c"]]), wl, chat_ids=_chat_ids, think_time_s=0.05)
    gaps = [(b.arrival_ns - a.chunk_ns[-1]) / 1e9 for a, b in zip(result.records, result.records[1:], strict=False)]
    assert sum(gaps) > 0.02  # two exponential gaps of mean 50 ms (seeded)


def test_planned_cancellations_are_cancelled_not_failed() -> None:
    from dataclasses import replace

    backend = FakeStreaming(gap_s=0.02)
    reqs = plan([[1]] * 4, n=10)  # 200 ms each
    reqs = [replace(p, cancel_after_s=0.05) if i % 2 else p for i, p in enumerate(reqs)]
    result = drive_phase(backend, reqs, Workload(requests=4, arrival="max"))
    assert [r.cancelled for r in result.records] == [False, True, False, True]
    assert all(r.error is None for r in result.records) and [r.ok for r in result.records] == [True, False, True, False]
    assert result.records[1].output_tokens < 10 and backend.in_flight == 0
