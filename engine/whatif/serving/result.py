"""The simulation's output: per request its times and token chunks, per step its end and size,
the run's statistics, and the same records a measured run has (:func:`to_records`), so the
project's metric code computes TTFT, TPOT, ITL and E2EL of a predicted run as of a measured one.

A request's chunks are not stored one by one: each request keeps the step ranges it produced
tokens in (``runs``: the step that completed its prompt, then its decode steps up to the end
step, exclusive), and the steps' end times and per-request yields are one array each.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from engine.measure.records import RequestRecord, RunRecord
from engine.whatif.serving.config import KvCapacity

NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """One request's simulated life, times in seconds from the phase start."""

    index: int
    due_s: float  # when it was due (a later turn: when it was sent)
    send_s: float  # when the client sent it (its due time, or when its slot or turn came)
    prompt_tokens: int  # as sent (a later turn: the conversation so far)
    requested_output_tokens: int
    output_tokens: int  # tokens the client received
    cached_prompt_tokens: int  # found in the prefix cache at its first admission
    preemptions: int
    cancelled: bool
    end_s: float  # its last token, or the client's cancellation
    runs: tuple[tuple[int, int], ...]
    session: int | None = None
    turn: int | None = None


@dataclass(frozen=True)
class RunStats:
    """What the simulated engine did over the run."""

    steps: int
    fast_forwarded_steps: int  # steps run in closed form, within ``steps``
    duration_s: float
    tokens_per_step_mean: float
    tokens_per_step_p50: float
    tokens_per_step_p90: float
    tokens_per_step_p99: float
    mean_batch: float  # sequences per step
    max_batch: int
    preemptions: int
    prefix_queries_tokens: int
    prefix_hits_tokens: int
    peak_kv_blocks: int
    num_blocks: int

    @property
    def prefix_hit_rate(self) -> float | None:
        """Prompt tokens found in the prefix cache over prompt tokens looked up (None: no lookup)."""
        return self.prefix_hits_tokens / self.prefix_queries_tokens if self.prefix_queries_tokens else None

    def to_dict(self) -> dict[str, float | int | None]:
        return {**asdict(self), "prefix_hit_rate": self.prefix_hit_rate}


def run_stats(
    tokens: np.ndarray, seqs: np.ndarray, duration_s: float, counts: dict[str, int], num_blocks: int
) -> RunStats:
    """The statistics of a run from its per-step tokens and sequences and its counters."""
    p50, p90, p99 = (float(v) for v in np.percentile(tokens, [50, 90, 99])) if len(tokens) else (0.0, 0.0, 0.0)
    return RunStats(
        steps=len(tokens),
        fast_forwarded_steps=counts["fast_forwarded"],
        duration_s=duration_s,
        tokens_per_step_mean=float(tokens.mean()) if len(tokens) else 0.0,
        tokens_per_step_p50=p50,
        tokens_per_step_p90=p90,
        tokens_per_step_p99=p99,
        mean_batch=float(seqs.mean()) if len(seqs) else 0.0,
        max_batch=int(seqs.max()) if len(seqs) else 0,
        preemptions=counts["preemptions"],
        prefix_queries_tokens=counts["queries"],
        prefix_hits_tokens=counts["hits"],
        peak_kv_blocks=counts["peak_blocks"],
        num_blocks=num_blocks,
    )


@dataclass(frozen=True, eq=False)
class SimResult:
    """A simulated phase: its requests in plan order, its steps, statistics and KV capacity.

    ``step_yield[s]``: the tokens step ``s`` gave each decoding request (1 without speculative
    decoding). ``due_times``: the requests had due times of their own (an open arrival process
    or a trace), as a measured run records it.
    """

    requests: list[RequestOutcome]
    step_end_s: np.ndarray
    step_tokens: np.ndarray
    step_seqs: np.ndarray
    step_yield: np.ndarray
    stats: RunStats
    capacity: KvCapacity
    due_times: bool = False

    def chunks(self, outcome: RequestOutcome) -> tuple[np.ndarray, np.ndarray]:
        """(end times in s, tokens) of the chunks the client received, one per step that gave it tokens."""
        if not outcome.runs:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        times = np.concatenate([self.step_end_s[p:e] for p, e in outcome.runs])
        parts = []
        for p, e in outcome.runs:
            part = self.step_yield[p:e].copy()
            part[0] = 1  # the step that completes a prompt samples one token
            parts.append(part)
        tokens = np.concatenate(parts)
        extra = int(tokens.sum()) - outcome.output_tokens
        if extra > 0:  # the last step yielded more than the request still wanted
            tokens[-1] -= extra
        return times, tokens

    def first_token_s(self, outcome: RequestOutcome) -> float | None:
        """When its first token came, or None."""
        return float(self.step_end_s[outcome.runs[0][0]]) if outcome.runs else None


def _ns(seconds: float, start_ns: int) -> int:
    return start_ns + round(seconds * NS)


def to_records(result: SimResult, start_ns: int = 0) -> tuple[list[RequestRecord], int, int]:
    """The phase as a measured run records it: one :class:`RequestRecord` per request (integer ns
    stamps from ``start_ns``: due, send (the simulated client never lags), a chunk per step that
    gave it tokens, cached prompt tokens), and the phase's start and end ns."""
    records = []
    for o in result.requests:
        times, tokens = result.chunks(o)
        send = _ns(o.send_s, start_ns)
        records.append(
            RequestRecord(
                index=o.index,
                arrival_ns=_ns(o.due_s, start_ns),
                send_ns=send,
                prompt_tokens=o.prompt_tokens,
                chunk_ns=(np.round(times * NS).astype(np.int64) + start_ns).tolist(),
                chunk_tokens=tokens.tolist(),
                requested_output_tokens=o.requested_output_tokens,
                session=o.session,
                turn=o.turn,
                cancelled=o.cancelled,
                cached_prompt_tokens=o.cached_prompt_tokens,
                ready_ns=send,
            )
        )
    return records, start_ns, _ns(result.stats.duration_s, start_ns)


def to_run_record(result: SimResult, start_ns: int = 0) -> RunRecord:
    """The phase as the :class:`RunRecord` :func:`engine.measure.metrics.compute_metrics` reads."""
    records, start, end = to_records(result, start_ns)
    return RunRecord(start, end, records, due_times=result.due_times)
