"""P99 spikes attributed: which requests were slow, when, and what coincided with them.

A *spike* is a completed measured request whose E2EL (send → last token) is above the
run's p99 (p90 with fewer than :data:`P99_FROM` requests) and at least :data:`SPIKE_RATIO`
times the median. For each, within its window (send → last token) the evidence says what
coincided:

- ``client queueing``: it waited client-side (due → sent) at least :data:`QUEUE_SHARE` of its E2EL;
- ``busy engine``: more requests were in flight as it was sent than at :data:`BUSY_RATIO` x the median send;
- ``long prompts``: prompts of at least the run's p90 length (and :data:`LONG_RATIO` x the median) were
  sent during its window, or its own prompt was one;
- ``throttling``: telemetry samples with power/thermal clock reasons or a temperature >= 85 °C;
- ``contention``: CPU steal, other processes on the GPU, or a load average above the core count;
- ``server queue``, ``preemptions``, ``KV-cache saturation``: from a ``server_metrics`` series
  (``num_requests_waiting`` > 0, ``num_preemptions_total`` rising, ``kv_cache_usage_perc`` >= 95 %).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from engine.jsonvalue import JSONMapping
from engine.measure.gpu_telemetry import SLOWDOWN_MASK
from engine.report.diagnostics_base import NS, Finding, in_window, offset_s, times, values

if TYPE_CHECKING:
    from engine.measure.records import RequestRecord

P99_FROM = 50
MIN_REQUESTS = 10
SPIKE_RATIO = 1.5
QUEUE_SHARE = 0.25
BUSY_RATIO = 1.5
LONG_RATIO = 1.5
HOT_C = 85.0
STEAL_PCT = 2.0
KV_FULL = 0.95
SUGGESTIONS: dict[str, str] = {
    "client queueing": "the load exceeded what the engine drained: lower the rate or raise max_concurrency "
    "(and the engine's batch size) if the memory allows",
    "busy engine": "spikes come with more requests in flight: the engine batches them together; cap concurrency "
    "or use continuous batching / chunked prefill so decodes are not stalled by others' prefills",
    "long prompts": "long prompts arriving together stall decoding: enable chunked prefill, cap the prompt "
    "tokens per batch, or route long prompts apart",
    "throttling": "the device slowed its clocks: see the throttling finding (cooling, power limit, locked clocks)",
    "contention": "something else used the machine: see the contention finding and rerun on a quiet machine",
    "server queue": "requests waited inside the server: more replicas, or a larger max_num_seqs if memory allows",
    "preemptions": "the server preempted requests (KV cache full): more KV-cache memory (gpu_memory_utilization), "
    "fewer concurrent sequences, or a smaller max_model_len",
    "KV-cache saturation": "the KV cache was almost full: give it more memory, quantize it (kv_cache_dtype fp8) "
    "or lower concurrency",
}


class _Context(TypedDict):
    """What every spike is checked against: the requests' spans, the usual load, the long prompts, the series."""

    spans: list[tuple[int, int]]
    median_flight: float
    long: list[RequestRecord]
    tele: JSONMapping | None
    server: JSONMapping | None
    shift: float


class _SpikeRow(TypedDict):
    """One spike request's evidence row and what coincided with it."""

    index: int
    window_s: list[float]
    e2el_ms: float
    ttft_ms: float
    queue_ms: float
    prompt_tokens: int
    in_flight_at_send: int
    long_prompts_in_window: list[int]
    coincided: list[str]


def _e2el_s(r: RequestRecord) -> float | None:
    return (r.chunk_ns[-1] - r.send_ns) / NS if r.chunk_ns else None


def _measured(requests: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in requests if not r.warmup and r.ok and r.chunk_ns]


def _threshold(latencies: list[float]) -> tuple[float, str, float]:
    """(spike threshold in s, which percentile, median)."""
    pct = 99 if len(latencies) >= P99_FROM else 90
    median = statistics.median(latencies)
    return max(float(np.percentile(latencies, pct)), SPIKE_RATIO * median), f"p{pct}", median


def _in_flight_at(t_ns: int, spans: list[tuple[int, int]]) -> int:
    return sum(1 for a, b in spans if a <= t_ns < b)


def _telemetry_causes(tele: JSONMapping | None, start: float, end: float) -> list[str]:
    if not tele:
        return []
    idx = in_window(times(tele), start, end, pad=(tele.get("interval_ms") or 100) / 1000)
    out = []
    mask, gtemp, ctemp = values(tele, "gpu_throttle_mask"), values(tele, "gpu_temp_c"), values(tele, "cpu_temp_c")

    def hit(col: list[float | None], test: Callable[[float], object]) -> bool:
        return any(i < len(col) and col[i] is not None and test(col[i]) for i in idx)

    if (
        hit(mask, lambda m: int(m) & SLOWDOWN_MASK)
        or hit(gtemp, lambda t: t >= HOT_C)
        or hit(ctemp, lambda t: t >= HOT_C)
    ):
        out.append("throttling")
    cores = tele.get("cpu_cores") or 1
    steal, others, load = values(tele, "steal_pct"), values(tele, "gpu_other_procs"), values(tele, "load_1m")
    if hit(steal, lambda s: s >= STEAL_PCT) or hit(others, lambda n: n > 0) or hit(load, lambda v: v > cores):
        out.append("contention")
    return out


def _server_causes(server: JSONMapping | None, shift: float, start: float, end: float) -> list[str]:
    if not server:
        return []
    t_s = [t + shift for t in times(server)]
    idx = in_window(t_s, start, end)
    if not idx:
        return []
    out = []
    waiting = [v for i in idx if (v := _at(server, "num_requests_waiting", i)) is not None]
    if waiting and max(waiting) > 0:
        out.append("server queue")
    pre = [
        v for i in range(max(idx[0] - 1, 0), idx[-1] + 1) if (v := _at(server, "num_preemptions_total", i)) is not None
    ]
    if len(pre) >= 2 and pre[-1] > pre[0]:
        out.append("preemptions")
    kv = [v for i in idx if (v := _at(server, "kv_cache_usage_perc", i)) is not None]
    if kv and max(v / 100 if v > 1 else v for v in kv) >= KV_FULL:
        out.append("KV-cache saturation")
    return out


def _at(series: JSONMapping, name: str, i: int) -> float | None:
    col = values(series, name)
    return None if i >= len(col) or col[i] is None else float(col[i])


def _row(r: RequestRecord, t0_ns: int, ctx: _Context) -> _SpikeRow:
    """One spike's evidence row and what coincided with it."""
    start, end = (r.send_ns - t0_ns) / NS, (r.chunk_ns[-1] - t0_ns) / NS
    e2el, queue = end - start, (r.send_ns - r.arrival_ns) / NS
    causes = []
    if queue >= QUEUE_SHARE * e2el:
        causes.append("client queueing")
    if (flight := _in_flight_at(r.send_ns, ctx["spans"])) >= max(2, BUSY_RATIO * ctx["median_flight"]):
        causes.append("busy engine")
    long_near = [q.index for q in ctx["long"] if q.send_ns <= r.chunk_ns[-1] and q.chunk_ns[-1] >= r.send_ns]
    if long_near:
        causes.append("long prompts")
    causes += _telemetry_causes(ctx["tele"], start, end)
    causes += _server_causes(ctx["server"], ctx["shift"], start, end)
    return {
        "index": r.index,
        "window_s": [round(start, 3), round(end, 3)],
        "e2el_ms": round(e2el * 1000, 1),
        "ttft_ms": round((r.chunk_ns[0] - r.send_ns) / 1e6, 1),
        "queue_ms": round(queue * 1000, 1),
        "prompt_tokens": r.prompt_tokens,
        "in_flight_at_send": flight,
        "long_prompts_in_window": long_near[:10],
        "coincided": causes,
    }


def _context(ok: list[RequestRecord], tele: JSONMapping | None, server: JSONMapping | None, t0: int) -> _Context:
    spans = [(r.send_ns, r.chunk_ns[-1]) for r in ok]
    lengths = [r.prompt_tokens for r in ok]
    long_from = max(float(np.percentile(lengths, 90)), LONG_RATIO * statistics.median(lengths))
    return {
        "spans": spans,
        "median_flight": statistics.median(_in_flight_at(r.send_ns, spans) for r in ok),
        "long": [r for r in ok if r.prompt_tokens >= long_from and r.prompt_tokens > min(lengths)],
        "tele": tele,
        "server": server,
        "shift": offset_s(server, t0) if server and server.get("t0_ns") is not None else 0.0,
    }


def p99_spikes(
    requests: Sequence[RequestRecord], tele: JSONMapping | None = None, server: JSONMapping | None = None
) -> list[Finding]:
    """One finding listing the spike requests and what coincided with them (module doc); [] when none."""
    ok = _measured(requests)
    if len(ok) < MIN_REQUESTS:
        return []
    latencies = [_e2el_s(r) or 0.0 for r in ok]
    threshold, pct, median = _threshold(latencies)
    slow = [r for r, lat in zip(ok, latencies, strict=True) if lat > threshold]
    if not slow:
        return []
    t0 = int((tele or {}).get("t0_ns") or min(r.send_ns for r in ok))
    ctx = _context(ok, tele, server, t0)
    rows = sorted((_row(r, t0, ctx) for r in slow), key=lambda row: -row["e2el_ms"])
    counts = Counter(c for row in rows for c in row["coincided"])
    worst_ms = rows[0]["e2el_ms"]
    details = [
        f"{len(rows)} of {len(ok)} requests took over {threshold * 1000:.0f} ms E2EL (the {pct}, "
        f"median {median * 1000:.0f} ms); the slowest {worst_ms:.0f} ms (request {rows[0]['index']})"
    ]
    details += [f"{cause}: {n} of {len(rows)} spikes" for cause, n in counts.most_common()]
    if not counts:
        details.append("nothing recorded coincided (no queueing, long prompts, throttling or contention)")
    suggestion = "; ".join(SUGGESTIONS[c] for c, _ in counts.most_common(2)) or (
        "nothing in the telemetry explains them: record a profile of the recipe, check garbage-collection "
        "pauses, and rerun with more requests to see whether they recur"
    )
    return [
        Finding(
            kind="p99_spikes",
            severity="warning" if worst_ms >= 3 * median * 1000 else "info",
            title=f"P99 spikes: {len(rows)} request(s) up to {worst_ms / (median * 1000):.1f}x the median E2EL",
            evidence={"details": details, "requests": rows[:20], "windows": [row["window_s"] for row in rows[:20]]},
            suggestion=suggestion[0].upper() + suggestion[1:] + ".",
        )
    ]
