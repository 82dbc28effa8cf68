"""Raw measurement records: what was sent when, and when each chunk came back.

Everything is a ``time.perf_counter_ns()`` integer from one process, so differences
are exact; milliseconds appear only in derived metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestRecord:
    """One request's raw stamps.

    ``arrival_ns`` is when the request became due (the run start for a closed loop,
    the scheduled time for an arrival process); ``send_ns`` is when it was actually
    handed to the engine. The gap is client-side queueing, kept apart from TTFT.
    """

    index: int
    arrival_ns: int
    send_ns: int
    prompt_tokens: int
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    error: str | None = None
    warmup: bool = False
    trial: int = 0  # which measured phase (trial or adaptive round) of the run sent it
    requested_output_tokens: int | None = None  # the request's own max new tokens (None: runs stored before)
    session: int | None = None  # multi-turn traffic: which session and turn it was
    turn: int | None = None
    cancelled: bool = False  # cancelled on purpose by the client (workload.cancel_rate): not a failure, no latency
    cached_prompt_tokens: int | None = None  # prompt tokens the engine found in its prefix cache, where it says
    # when the client could send it: its due time, or when its concurrency slot or its static batch's turn came
    # (the client's own send lag is send_ns - ready_ns: engine.measure.client_lag); kept in memory, not stored
    ready_ns: int = 0
    text: str | None = field(default=None, repr=False)  # the reply's text, only when the plan needs it back

    @property
    def ok(self) -> bool:
        """Completed: neither failed nor cancelled."""
        return self.error is None and not self.cancelled

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_tokens)

    def add_chunk(self, t_ns: int, n_tokens: int) -> None:
        self.chunk_ns.append(t_ns)
        self.chunk_tokens.append(n_tokens)


@dataclass
class RunRecord:
    """The raw result of one measured phase: requests plus the phase's bounds."""

    start_ns: int
    end_ns: int
    requests: list[RequestRecord]
    warmup_requests: int = 0
    due_times: bool = False  # its requests had due times of their own (latency from the due time is kept)
