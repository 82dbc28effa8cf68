"""Every figure a run reports, declared once: one small declaration per metric (DESIGN.md, "Metrics").

A declaration (:class:`~engine.measure.metric.Metric`) says the flat key, label, short header,
unit, direction, kind, display order, where the figure appears, its interval rule, and its
computation from the measured :class:`~engine.measure.stamps.Phase` (``compute``) or who
reports it (``source``). Latency groups (:class:`Group`) declare their five statistics at once.
Every list of metrics elsewhere (the result object, Compare's rows, the summary's figures, the
per-trial rows, the SQL columns, Explore's axes) is asked of the registry, which holds these.

To add a metric: one more declaration in :data:`METRICS` (see ARCHITECTURE.md, "How to add a metric").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.measure.metric import COLUMN, COMPARE, EXPLORE, RESULT, SUMMARY, TRIALS, Metric, error_rate
from engine.measure.stamps import Phase, cached_share

STATS: tuple[str, ...] = ("mean", "p50", "p90", "p95", "p99")
# Where a new figure goes (no SQL column: one needs an Alembic revision, see ARCHITECTURE.md "How to add a metric")
SHOWN = frozenset({RESULT, EXPLORE, COMPARE})
# The figures that have their own SQL column of ``runs`` (each added by a revision; tests/storage/test_columns.py
# checks the migrated schema has exactly these): headline figures in the result, Explore and a column ...
STORED_COLUMN = frozenset({RESULT, EXPLORE, COLUMN})
SHOWN_COLUMN = STORED_COLUMN | {COMPARE}  # ... and Compare
ACCURACY_COLUMN = frozenset({COMPARE, EXPLORE, COLUMN})  # accuracy sits in the result's own quality object


@dataclass(frozen=True)
class Group:
    """A latency group: per-request samples in ms and their mean, p50, p90, p95 and p99."""

    key: str  # ``tpot_ms``: the result JSON's group, and the prefix of its flat keys (``tpot_ms_p50``)
    label: str  # the group's name in tables (``TPOT (GenAI-Perf/AIPerf: ITL)``)
    short: str  # ``TPOT``: the statistics' short headers
    order: int
    samples: Callable[[Phase], list[float]]  # its samples in ms
    headline: bool = True  # one of DESIGN's four result groups (client queueing is not)
    optional: bool = False  # left out of a phase without samples of it (latency from the due time)
    shown: frozenset[str] = frozenset()  # where every statistic appears
    by_stat: Mapping[str, frozenset[str]] = field(default_factory=dict)  # and where some appear besides
    note: str = ""  # added to every statistic's label

    def metrics(self) -> list[Metric]:
        """The group's statistics as metrics (``tpot_ms_mean`` ... ``tpot_ms_p99``)."""
        return [
            Metric(
                f"{self.key}_{stat}",
                f"{self.short} {stat}{self.note}",
                "ms",
                "lower",
                "latency",
                f"{self.short} {stat}",
                order=self.order + i,
                shown=self.shown | self.by_stat.get(stat, frozenset()),
                interval="mean" if stat == "mean" else "percentile",
                source=f"the {stat} of the {self.short} samples",
                group=self.key,
                stat=stat,
            )
            for i, stat in enumerate(STATS)
        ]


def _group_samples(key: str) -> Callable[[Phase], list[float]]:
    return lambda phase: phase.samples[key]


_P50 = frozenset({COMPARE, TRIALS})
GROUPS: tuple[Group, ...] = (
    Group(
        "ttft_ms", "TTFT", "TTFT", 100, _group_samples("ttft_ms"), shown=STORED_COLUMN,
        by_stat={"p50": _P50 | {SUMMARY}, "p90": frozenset({COMPARE}), "p99": frozenset({COMPARE})},
    ),
    Group(
        "tpot_ms", "TPOT (GenAI-Perf/AIPerf: ITL)", "TPOT", 200, _group_samples("tpot_ms"), shown=STORED_COLUMN,
        by_stat={"p50": _P50 | {SUMMARY}, "p99": frozenset({COMPARE})}, note=" (GenAI-Perf: ITL)",
    ),
    Group(
        "itl_ms", "ITL (AIPerf: ICL)", "ITL", 300, _group_samples("itl_ms"), shown=STORED_COLUMN,
        by_stat={"p50": _P50, "p99": frozenset({COMPARE})},
    ),
    Group(
        "e2el_ms", "E2EL", "E2EL", 400, _group_samples("e2el_ms"), shown=STORED_COLUMN,
        by_stat={"p50": _P50, "p99": frozenset({COMPARE})},
    ),
    Group(
        "queue_ms", "client queueing", "queueing", 500, _group_samples("queue_ms"), headline=False,
        shown=frozenset({RESULT}),
    ),
    # coordinated omission: where requests have due times, latency from the due time beside latency from the send
    Group(
        "ttft_from_due_ms", "TTFT from the due time", "TTFT from due", 600, _group_samples("ttft_from_due_ms"),
        headline=False, optional=True, shown=frozenset({RESULT}), note=" (from the due time)",
    ),
    Group(
        "e2el_from_due_ms", "E2EL from the due time", "E2EL from due", 700, _group_samples("e2el_from_due_ms"),
        headline=False, optional=True, shown=frozenset({RESULT}), note=" (from the due time)",
    ),
)  # fmt: skip


# -- computations over the measured phase -------------------------------------------------------
def _per_s(count: float, phase: Phase) -> float:
    return count / phase.duration_s


def _output_tokens(phase: Phase) -> int:
    return phase.output_tokens


def _per_user(phase: Phase) -> float | None:
    rates = [1000.0 / t for t in phase.samples["tpot_ms"] if t > 0]
    return float(np.mean(rates)) if rates else None


def _goodput(phase: Phase) -> float | None:
    return None if phase.good is None else _per_s(len(phase.good), phase)


def _goodput_fraction(phase: Phase) -> float | None:
    return len(phase.good) / len(phase.measured) if phase.good is not None and phase.measured else None


def _error_rate(phase: Phase) -> float | None:
    measured = len(phase.measured)
    return (measured - len(phase.ok)) / measured if measured else None


def _tokens_per_chunk(phase: Phase) -> float | None:
    tokens, chunks = phase.token_chunks  # the mean of the token-bearing chunks' sizes
    return tokens / chunks if chunks else None


def _rows(key: str) -> Callable[[Phase], np.ndarray | None]:
    return lambda phase: phase.throughput.get(key)


def _client(name: str) -> Callable[[Mapping[str, object], Mapping[str, object]], object]:
    """A figure of the result's ``client`` group (engine.measure.client_lag: the client checks itself)."""
    return lambda metrics, _quality: (metrics.get("client") or {}).get(name)  # type: ignore[union-attr]


def _client_lag(name: str, label: str, short: str, order: int, shown: frozenset[str] = frozenset()) -> Metric:
    return Metric(
        f"client_{name}", label, "ms", "lower", "latency", short, order=order, shown=shown,
        source="the load driver and its client processes (engine.measure.client_lag)", read=_client(name),
    )  # fmt: skip


def _bookkeeping(key: str, label: str, shown: frozenset[str], order: int, **how: object) -> Metric:
    return Metric(key, label, "", None, "bookkeeping", order=order, shown=shown, **how)  # type: ignore[arg-type]


_RUNNER = "the runner: "
_ACCURACY = "the accuracy phase (engine.accuracy), scored by the recipe's own backend"
_ENERGY = "the energy meter of the measured phase (engine.measure.energy: NVML or RAPL; None with a reason)"
_ALL = SHOWN_COLUMN | {TRIALS}
_IN_RESULT = frozenset({RESULT})
_PER_TRIAL = frozenset({RESULT, TRIALS})
_EXPLORE = frozenset({EXPLORE})

METRICS: tuple[Metric, ...] = (
    *(m for g in GROUPS for m in g.metrics()),
    # throughput
    Metric(
        "output_tokens_per_s", "output tokens/s", "tok/s", "higher", "throughput", "tok/s", order=1000,
        shown=_ALL | {SUMMARY}, interval="bootstrap", samples=_rows("output_tokens_per_s"),
        compute=lambda phase: _per_s(_output_tokens(phase), phase), aliases=("tokens_per_s",),
    ),
    Metric(
        "requests_per_s", "requests/s", "req/s", "higher", "throughput", "req/s", order=1010, shown=_ALL,
        interval="bootstrap", samples=_rows("requests_per_s"), compute=lambda phase: _per_s(len(phase.ok), phase),
    ),
    Metric(
        "tokens_per_s_per_user", "tokens/s per user (1/TPOT)", "tok/s", "higher", "throughput", "tok/s/user",
        order=1020, shown=SHOWN_COLUMN, interval="mean", compute=_per_user,
        samples=lambda phase: np.asarray(phase.per_user, dtype=float),
    ),
    Metric(
        "output_tokens_per_s_per_gpu", "output tokens/s per GPU", "tok/s", "higher", "throughput", "tok/s/GPU",
        order=1030, shown=SHOWN_COLUMN, source=_RUNNER + "output tokens/s over the job's GPUs (None on the CPU)",
    ),
    Metric(
        "goodput_requests_per_s", "goodput (requests/s meeting every SLO)", "req/s", "higher", "throughput",
        "goodput", order=1040, shown=SHOWN_COLUMN, compute=_goodput,
    ),
    Metric(
        "goodput_fraction", "share of requests meeting every SLO", "ratio", "higher", "throughput", "SLO met",
        order=1050, shown=STORED_COLUMN, compute=_goodput_fraction,
    ),
    Metric(
        "error_rate", "failed requests", "ratio", "lower", "throughput", "failed", order=1060, shown=SHOWN_COLUMN,
        compute=_error_rate, read=error_rate,
    ),
    # memory, load, energy: reported by the phases around the measured one
    Metric(
        "peak_memory_bytes", "peak memory (measured phase)", "bytes", "lower", "memory", "peak mem", order=1100,
        shown=SHOWN_COLUMN, source=_RUNNER + "CUDA max allocated after a reset, or the sampled RSS of the process tree",
    ),
    Metric(
        "weights_memory_bytes", "weights memory (as loaded)", "bytes", "lower", "memory", "weights", order=1110,
        shown=SHOWN_COLUMN, source=_RUNNER + "the backend's load report: parameters and buffers after quantization",
    ),
    Metric(
        "load_s", "model load time", "s", "lower", "latency", "load", order=1120, shown=SHOWN_COLUMN,
        source=_RUNNER + "the backend's load report",
    ),
    Metric(
        "energy_per_output_token_j", "energy per output token", "J/token", "lower", "energy", "J/tok", order=1130,
        shown=SHOWN_COLUMN, source=_ENERGY,
    ),
    Metric(
        "avg_power_w", "average power (measured phase)", "W", "lower", "energy", "power", order=1140, shown=SHOWN_COLUMN,
        source=_ENERGY,
    ),
    # accuracy of the same recipe (Compare lists every one a run has)
    Metric(
        "quality.perplexity", "perplexity", "", "lower", "accuracy", "ppl", order=2000, shown=ACCURACY_COLUMN | {SUMMARY},
        source=_ACCURACY, aliases=("perplexity",),
    ),
    Metric(
        "quality.kl_mean", "KL mean vs reference", "nats", "lower", "accuracy", "KL", True, order=2010,
        shown=ACCURACY_COLUMN, source=_ACCURACY, aliases=("kl_mean",),
    ),
    Metric(
        "quality.kl_p99", "KL p99 vs reference", "nats", "lower", "accuracy", "KL p99", True, order=2020,
        shown=ACCURACY_COLUMN, source=_ACCURACY, aliases=("kl_p99",),
    ),
    Metric(
        "quality.top1_agreement", "top-1 agreement vs reference", "ratio", "higher", "accuracy", "top-1", True,
        order=2030, shown=ACCURACY_COLUMN, source=_ACCURACY, aliases=("top1_agreement",),
    ),
    Metric(
        "quality.greedy_flip_rate", "greedy flip rate vs reference", "ratio", "lower", "accuracy", "flips", True,
        order=2040, shown=ACCURACY_COLUMN, source=_ACCURACY, aliases=("greedy_flip_rate",),
    ),
    # the client checks itself (the result's "client" group): how late it sent and how late its event loop ran
    _client_lag("send_lag_ms_p50", "client send lag p50 (send minus due or slot)", "send lag p50", 800),
    _client_lag("send_lag_ms_p99", "client send lag p99 (send minus due or slot)", "send lag p99", 801, _EXPLORE),
    _client_lag("loop_lag_ms_p50", "client event-loop lag p50", "loop lag p50", 810),
    _client_lag("loop_lag_ms_p99", "client event-loop lag p99", "loop lag p99", 811, _EXPLORE),
    _client_lag("loop_lag_ms_max", "client event-loop lag max", "loop lag max", 812),
    _bookkeeping(
        "client_cpu_share", "client CPU share of its cores", frozenset(), 3200, read=_client("cpu_share"),
        source="the load driver and its client processes (engine.measure.client_lag)",
    ),
    _bookkeeping(
        "client_cpu_share_max", "client CPU share of its busiest process", frozenset(), 3210,
        read=_client("cpu_share_max"), source="the load driver and its client processes (engine.measure.client_lag)",
    ),
    _bookkeeping(
        "client_processes", "client processes that sent", frozenset(), 3220, read=_client("processes"),
        source="the runner (engine/run/sending.py)",
    ),
    # bookkeeping: counts and companions of the figures, never shown or compared as metrics
    _bookkeeping("mean_tokens_per_chunk", "mean tokens per chunk", _IN_RESULT, 3000, compute=_tokens_per_chunk),
    _bookkeeping("completed", "completed requests", _PER_TRIAL, 3010, compute=lambda phase: len(phase.ok)),
    _bookkeeping(
        "failed", "failed requests", _PER_TRIAL, 3020, compute=lambda phase: len(phase.measured) - len(phase.ok)
    ),
    _bookkeeping(
        "warmup_excluded", "warm-up requests excluded", _IN_RESULT, 3030,
        compute=lambda phase: sum(r.warmup for r in phase.requests),
    ),
    _bookkeeping(  # workload.cancel_rate: closed by the client on purpose, out of every other figure
        "cancelled", "requests cancelled by the client", _IN_RESULT, 3035,
        compute=lambda phase: sum(r.cancelled and not r.warmup for r in phase.requests),
    ),
    _bookkeeping(  # the engine's own count of prefix-cache hits per prompt (vLLM), where it reports them
        "cached_prompt_share", "prompt tokens found in the prefix cache", _IN_RESULT, 3037,
        compute=lambda phase: cached_share(phase.ok),
    ),
    _bookkeeping("total_output_tokens", "output tokens", _IN_RESULT, 3040, compute=_output_tokens),
    _bookkeeping(
        "total_prompt_tokens", "prompt tokens", frozenset(), 3050,
        compute=lambda phase: sum(r.prompt_tokens for r in phase.ok),
    ),
    _bookkeeping("duration_s", "measured duration [s]", _PER_TRIAL, 3060, compute=lambda phase: phase.duration_s),
    _bookkeeping("warmup_s", "warm-up time [s]", _IN_RESULT, 3100, source=_RUNNER + "the warm-up phase"),
    _bookkeeping("quality_s", "accuracy phase time [s]", _IN_RESULT, 3110, source=_ACCURACY),
    _bookkeeping("peak_memory_kind", "what peak memory measured", _IN_RESULT, 3120, source=_RUNNER + "memory"),
    _bookkeeping("energy_j", "energy of the measured phase [J]", _IN_RESULT, 3130, source=_ENERGY),
    _bookkeeping("energy_source", "where the energy was read", _IN_RESULT, 3140, source=_ENERGY),
    _bookkeeping("energy_unavailable", "why there is no energy figure", _IN_RESULT, 3150, source=_ENERGY),
)  # fmt: skip
