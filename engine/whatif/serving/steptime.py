"""How long one engine step takes: a roofline of the batch's work plus fitted host overheads.

Per GPU of a tensor-parallel group of ``tp``:

- **memory**: the weights read once per step (the embedding table only gathered unless it is
  also the output projection) plus the KV cache the batch's attention reads, the summed context
  of its sequences, over ``bandwidth x eff_bandwidth``;
- **compute**: ``2 x linear parameters`` FLOPs per token processed, ``2 x lm-head parameters``
  per sampled position (vLLM computes logits only where it samples), and attention's
  ``4 x layers x heads x head_dim`` FLOPs per query-key pair times ``attention_coef`` (a prefill
  chunk of ``n`` tokens after ``c`` computed ones has ``n x (c + (n + 1) / 2)`` pairs: the sum of
  squared prompt lengths, halved, for whole prompts), over ``peak x eff_compute``; all / ``tp``;
- **communication**: two all-reduces per layer of the step's activations over the interconnect
  (ring: ``2 (tp - 1) / tp`` of the bytes, and a latency per hop), as the static estimator
  (:mod:`engine.whatif.roofline`) counts them.

The device time is ``max(compute, memory) + communication``. The host overheads (per step,
per scheduled sequence, per prefill and decode token, per new request, per output token) add
to it: vLLM's engine loop schedules, prepares the inputs, waits for the step and processes its
outputs in turn, so its host work lies on the critical path of every step rather than behind
the device's (and an eager engine's launches do too).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from engine.whatif.memory import kv_bytes_per_token_per_gpu, weights_bytes
from engine.whatif.recipe import BYTES, COMPUTE_PRECISION
from engine.whatif.roofline import ALLREDUCE_LATENCY_S, INTERCONNECT_EFFICIENCY
from engine.whatif.serving.config import ConfigError, Served

GB = 1e9


@dataclass(frozen=True)
class StepCosts:
    """The step-time model's fitted parameters, each in its unit; the defaults are uncalibrated priors.

    Host terms, in seconds: ``step_s`` per step, ``seq_s`` per scheduled sequence, ``prefill_token_s``
    per prefill token and ``decode_token_s`` per decode token scheduled, ``arrival_s`` per request
    admitted for the first time, ``output_token_s`` per token returned to a client.
    Device terms: ``eff_bandwidth``, ``eff_compute`` and ``eff_interconnect`` are shares (0, 1] of
    the data sheet's memory bandwidth, peak FLOP/s at the compute precision and interconnect
    bandwidth; ``attention_coef`` multiplies the attention FLOPs (dimensionless, 1 = the textbook
    count); ``allreduce_latency_s`` is seconds per ring hop of one all-reduce.
    """

    step_s: float = 2e-3
    seq_s: float = 2e-5
    prefill_token_s: float = 0.0
    decode_token_s: float = 0.0
    arrival_s: float = 1e-4
    output_token_s: float = 0.0
    eff_bandwidth: float = 0.75
    eff_compute: float = 0.6
    attention_coef: float = 1.0
    eff_interconnect: float = INTERCONNECT_EFFICIENCY
    allreduce_latency_s: float = ALLREDUCE_LATENCY_S
    frontend_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("eff_bandwidth", "eff_compute", "eff_interconnect"):
            if not 0 < getattr(self, name) <= 1:
                raise ConfigError(f"{name} {getattr(self, name)} must be in (0, 1]")
        negative = [k for k, v in asdict(self).items() if v < 0]
        if negative:
            raise ConfigError(f"step costs must not be negative: {', '.join(negative)}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


UNITS: dict[str, str] = {
    "step_s": "s per step",
    "seq_s": "s per scheduled sequence per step",
    "prefill_token_s": "s per prefill token",
    "decode_token_s": "s per decode token scheduled",
    "arrival_s": "s per request admitted for the first time",
    "output_token_s": "s per token returned",
    "eff_bandwidth": "share of the data sheet's memory bandwidth, (0, 1]",
    "eff_compute": "share of the data sheet's peak FLOP/s, (0, 1]",
    "attention_coef": "multiplier on 4 x layers x heads x head_dim FLOPs per query-key pair",
    "eff_interconnect": "share of the interconnect's bandwidth, (0, 1]",
    "allreduce_latency_s": "s per ring hop of one all-reduce",
    "frontend_s": "s the API server takes per request before the engine sees it (serial)",
}  # each StepCosts field's unit, for a fitter and its report

IDEAL = StepCosts(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0)  # the bare roofline, no host work


@dataclass(frozen=True)
class StepBatch:
    """What one step processes: the simulator's summary of a batch.

    ``context_tokens``: sum over the scheduled sequences of the tokens in their KV after the step
    (what attention reads); ``attention_pairs2``: twice the query-key pairs (an integer);
    ``logits``: positions sampled; ``arrivals``: requests scheduled for the first time;
    ``output_tokens``: tokens returned to clients.
    """

    seqs: int
    prefill_tokens: int = 0
    decode_tokens: int = 0
    logits: int = 0
    context_tokens: int = 0
    attention_pairs2: int = 0
    arrivals: int = 0
    output_tokens: int = 0


Num = float | np.ndarray  # a number, or one per step


class StepModel:
    """The step time's coefficients for one deployment, computed once; :meth:`time` for one step,
    :meth:`times` for many (numpy arrays, the same arithmetic in the same order: equal results)."""

    def __init__(self, served: Served, tp: int, costs: StepCosts) -> None:
        shape, hw, prec = served.shape, served.hardware, served.precisions
        if tp > 1 and not hw.interconnect_gbs:
            raise ConfigError(f"{hw.name} has no interconnect figure; tensor parallel {tp} needs one")
        if tp > 1 and shape.heads % tp:
            raise ConfigError(f"{shape.name} has {shape.heads} attention heads, not divisible by tensor parallel {tp}")
        self.costs = costs
        peak, self.compute_precision = hw.peak_flops(COMPUTE_PRECISION[prec.weight])
        streamed = weights_bytes(shape, prec.weight) - (
            0 if shape.tied_embeddings else shape.embed_params * BYTES[prec.weight]
        )
        self.weight_bytes = streamed / tp
        self.kv_token_bytes = kv_bytes_per_token_per_gpu(shape, prec.kv, tp)
        self.inv_bandwidth = 1.0 / (hw.bandwidth_bytes_per_s * costs.eff_bandwidth)
        self.inv_compute = 1.0 / (peak * costs.eff_compute)
        self.token_flops = 2 * shape.linear_params / tp
        self.logit_flops = 2 * shape.lm_head_params / tp
        self.pair2_flops = costs.attention_coef * 2 * shape.layers * shape.heads * shape.head_dim / tp
        self.comm_fixed, self.comm_token = 0.0, 0.0
        if tp > 1:
            link = (hw.interconnect_gbs or 0) * GB * costs.eff_interconnect
            act = 4 if prec.weight == "fp32" else 2
            self.comm_token = 2 * shape.layers * 2 * (tp - 1) / tp * shape.hidden * act / link
            self.comm_fixed = 2 * shape.layers * 2 * (tp - 1) * costs.allreduce_latency_s

    def _parts(
        self, seqs: Num, prefill: Num, decode: Num, logits: Num, context: Num, pairs2: Num, arrivals: Num, outputs: Num
    ) -> tuple[Num, Num, Num, Num]:
        c = self.costs
        host = (
            c.step_s + c.seq_s * seqs + c.prefill_token_s * prefill + c.decode_token_s * decode
            + c.arrival_s * arrivals + c.output_token_s * outputs
        )  # fmt: skip
        tokens = prefill + decode
        compute = (self.token_flops * tokens + self.logit_flops * logits + self.pair2_flops * pairs2) * self.inv_compute
        memory = (self.weight_bytes + self.kv_token_bytes * context) * self.inv_bandwidth
        comm = self.comm_fixed + self.comm_token * tokens
        return host, compute, memory, comm

    def time(
        self, seqs: int, prefill: int, decode: int, logits: int, context: int, pairs2: int, arrivals: int, outputs: int
    ) -> float:
        """Seconds one step takes (integer inputs: see :class:`StepBatch`)."""
        host, compute, memory, comm = self._parts(seqs, prefill, decode, logits, context, pairs2, arrivals, outputs)
        return host + max(compute, memory) + comm

    def times(
        self, seqs: int, decode: int, logits: int, context: np.ndarray, pairs2: np.ndarray, outputs: np.ndarray
    ) -> np.ndarray:
        """Seconds of a run of decode-only steps (no prefill, no arrivals), one per element."""
        host, compute, memory, comm = self._parts(seqs, 0, decode, logits, context, pairs2, 0, outputs)
        return host + np.maximum(compute, memory) + comm

    def batch_time(self, batch: StepBatch) -> float:
        """Seconds the step ``batch`` takes."""
        b = batch
        return self.time(
            b.seqs,
            b.prefill_tokens,
            b.decode_tokens,
            b.logits,
            b.context_tokens,
            b.attention_pairs2,
            b.arrivals,
            b.output_tokens,
        )

    def breakdown(self, batch: StepBatch) -> dict[str, float]:
        """The step's terms in seconds: host, compute, memory, communication and the total."""
        b = batch
        host, compute, memory, comm = self._parts(
            b.seqs, b.prefill_tokens, b.decode_tokens, b.logits, b.context_tokens, b.attention_pairs2, b.arrivals, b.output_tokens
        )  # fmt: skip
        return {"host_s": host, "compute_s": compute, "memory_s": memory, "comm_s": comm, "total_s": self.batch_time(b)}


def step_time(batch: StepBatch, served: Served, tp: int, costs: StepCosts) -> float:
    """Seconds one step of ``batch`` takes for ``served`` at tensor parallel ``tp`` under ``costs``."""
    return StepModel(served, tp, costs).batch_time(batch)
