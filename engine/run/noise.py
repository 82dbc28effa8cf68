"""Noise and validity flags of a run (pure): was it measured under contention, and can its figures stand?

:func:`noise_flags` reads the samples of :class:`engine.measure.provenance.NoiseSampler`
(``provenance["noise"]``) and the run's metrics, and returns one ``{"flag", "detail"}``
per problem, stored as ``metrics["noise_flags"]``; each also says its ``kind``:
``"machine"`` (the machine was busy: the figures are measured under contention) or
``"validity"`` (the run itself is too thin to stand). The rules (thresholds below):

- ``contention``: other processes (not the job's own tree) used at least
  :data:`OTHERS_CORES` of a core on average during the measured phase, or the 1-minute
  load average during it, less the cores the job itself used, reached the number of cores
  (other runnable threads could have filled the machine);
- ``steal``: the hypervisor took at least :data:`STEAL_PCT` % of the CPU time;
- ``gpu_busy``: another process computed on the job's GPU;
- ``few_requests``: fewer completed requests than p50 needs for an interval
  (:func:`engine.measure.stats.min_samples`, 6 at 95 %);
- ``short``: the measured phase lasted under :data:`SHORT_S` seconds;
- ``warmup``: with 3 or more trials, the first trial's TPOT p50 is slower than every
  other trial and by more than the others' own spread (and :data:`DRIFT_PCT` %):
  the warm-up was too short;
- ``drift``: the trials' TPOT p50 spread ((max - min) / median) exceeds :data:`SPREAD_PCT` %;
- ``client_bound``: the client, not the server, set the pace (``metrics["client"]``,
  :mod:`engine.measure.client_lag`): its busiest process used at least :data:`CLIENT_CPU_SHARE` of
  its core, its event loop ran :data:`CLIENT_LOOP_LAG_MS` ms late or more (p99), or requests went out
  :data:`CLIENT_SEND_LAG_MS` ms or more after they could (p99). Where the kernel stamped the reads
  (``read_stamps``), a late loop stamped nothing late, and its lag counts only from a stream's token gap
  up (the ITL p50, when longer): a stream's next event may then have arrived before the loop read the
  previous one, and the two can share one packet's stamp. Its stamps and sends were late, so
  its latencies say more about the client than about the server: it counts as a busy machine
  (``kind`` ``"machine"``), as contention does (Explore hides such runs with them, Compare warns).
  The flag names the cause it measured (``cause``; :func:`engine.measure.client_lag.client_cause`): the
  client's own CPU (advice: more ``--client-processes``), a server on the same cores (the host's cores
  busy with the job's own server while the client asked for little; advice: separate cores, another
  host, fewer server threads), other processes, or nothing measured busy.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.jsonvalue import JSONMapping
from engine.measure.client_lag import client_cause
from engine.measure.schedule import duration_text
from engine.measure.stats import min_samples

OTHERS_CORES = 0.5  # other processes' CPU use, in cores, that counts as contention
STEAL_PCT = 2.0
SHORT_S = 1.0
DRIFT_PCT = 3.0  # the first trial must be slower than the rest by more than this (and their spread)
SPREAD_PCT = 10.0


CLIENT_CPU_SHARE = 0.9  # of one core: an event loop runs on one
CLIENT_LOOP_LAG_MS = 5.0
CLIENT_SEND_LAG_MS = 10.0

MACHINE_FLAGS = ("contention", "steal", "gpu_busy", "client_bound")


def _flag(flag: str, detail: str) -> dict[str, str]:
    return {"flag": flag, "kind": "machine" if flag in MACHINE_FLAGS else "validity", "detail": detail}


def _load_words(samples: JSONMapping) -> str:
    load, cores = samples.get("load_during_max"), samples.get("cpu_count")
    return "" if load is None or not cores else f"load {load:.1f} on {cores} cores"


def machine_flags(samples: JSONMapping | None) -> list[dict[str, str]]:
    """Flags from what else the machine did: contention, steal, a busy GPU."""
    if not samples:
        return []
    out = []
    cores = samples.get("cpu_count") or 1
    others = (samples.get("others_cpu_pct") or 0.0) / 100
    load = samples.get("load_during_max")
    job = (samples.get("job_cpu_pct") or 0.0) / 100
    if others >= OTHERS_CORES or (load is not None and load - job >= cores):
        names = ", ".join(f"{p['name']} {p['cpu_pct']:.0f} %" for p in samples.get("busy_processes") or [])
        parts = [_load_words(samples), f"other processes used {others:.1f} cores" + (f" ({names})" if names else "")]
        out.append(_flag("contention", "; ".join(p for p in parts if p)))
    steal = samples.get("steal_pct")
    if steal is not None and steal >= STEAL_PCT:
        out.append(_flag("steal", f"CPU steal {steal:.1f} % (the hypervisor ran other guests)"))
    for busy in samples.get("gpu_busy") or []:
        out.append(_flag("gpu_busy", f"another process on the GPU: {busy}"))
    return out


def validity_flags(metrics: JSONMapping) -> list[dict[str, str]]:
    """Flags from the run's own figures: too few requests, too short a phase, trial drift."""
    out = []
    need = min_samples(50)
    completed = metrics.get("completed")
    if completed is not None and completed < need:
        out.append(_flag("few_requests", f"{completed} completed requests: p50 needs {need} for an interval"))
    duration = metrics.get("duration_s")
    if duration is not None and duration < SHORT_S:
        out.append(_flag("short", f"measured phase {duration:.2f} s (under {SHORT_S:g} s)"))
    out.extend(drift_flags(metrics.get("trials") or [], metrics.get("trial_drift")))
    return out


def drift_flags(trials: Sequence[JSONMapping], drift: JSONMapping | None) -> list[dict[str, str]]:
    """``warmup`` (first trial slower than the rest beyond their spread) and ``drift`` (a wide spread)."""
    if not drift:
        return []
    out = []
    values = [t.get("tpot_ms_p50") for t in trials]
    first, rest_spread = drift.get("first_vs_rest_pct"), drift.get("rest_spread_pct")
    if (
        len(values) >= 3
        and None not in values
        and first is not None
        and values[0] > max(values[1:])
        and first > max(DRIFT_PCT, rest_spread or 0.0)
    ):
        out.append(
            _flag(
                "warmup",
                f"trial 1 TPOT p50 {first:.0f} % slower than the others (their spread {rest_spread or 0:.0f} %): "
                "warm-up too short",
            )
        )
    spread = drift.get("spread_pct")
    if spread is not None and spread > SPREAD_PCT:
        out.append(_flag("drift", f"TPOT p50 varies {spread:.0f} % between {len(values)} trials"))
    return out


def client_flags(
    client: JSONMapping | None,
    itl_p50_ms: float | None = None,
    samples: JSONMapping | None = None,
    engine: str | None = None,
) -> list[dict[str, str]]:
    """``client_bound`` when the client's own figures say it set the pace (the rules above), naming the cause it
    measured (:func:`engine.measure.client_lag.client_cause`: the client's own CPU, a server on the same cores,
    other processes) and the advice that fits it. ``samples``: the machine's (``provenance["noise"]``);
    ``engine``: the run's engine (its descriptor says whether its server runs on this host)."""
    if not client:
        return []
    reasons = []
    share = client.get("cpu_share_max")
    if share is not None and share >= CLIENT_CPU_SHARE:
        reasons.append(f"its busiest process used {share:.0%} of a core")
    loop = client.get("loop_lag_ms_p99")
    kernel = client.get("read_stamps") == "kernel"
    gap = itl_p50_ms if kernel and itl_p50_ms is not None and itl_p50_ms > CLIENT_LOOP_LAG_MS else None
    if loop is not None and loop >= (gap or CLIENT_LOOP_LAG_MS):
        reasons.append(
            f"its event loop ran {loop:.1f} ms late (p99)"
            + (f", longer than a stream's token gap ({gap:.1f} ms p50)" if gap is not None else "")
        )
    send = client.get("send_lag_ms_p99")
    if send is not None and send >= CLIENT_SEND_LAG_MS:
        reasons.append(f"requests went out {duration_text(send)} after they could (p99)")
    if not reasons:
        return []
    n = client.get("processes") or 1
    cause = client_cause(client, samples, server_on_host(engine))
    detail = (
        f"the client set the pace: {', '.join(reasons)} ({n} client process{'es' if n > 1 else ''}); "
        f"cause: {cause.words}; {cause.advice}"
    )
    return [{**_flag("client_bound", detail), "cause": cause.kind}]


def server_on_host(engine: str | None) -> bool | None:
    """Whether the engine's server (or model) runs on the job's own host: its descriptor is not ``remote``
    (None: the engine is not known)."""
    from engine.spec import engines

    found = engines.find(engine) if engine else None
    return None if found is None else not found.capabilities.remote


def noise_flags(samples: JSONMapping | None, metrics: JSONMapping, engine: str | None = None) -> list[dict[str, str]]:
    """Every flag of a run: the machine's (contention, steal, GPU, a client that set the pace) then the
    figures' (requests, length, drift). ``engine``: the run's engine, for the client-bound flag's words."""
    itl = metrics.get("itl_ms")
    itl_p50 = itl.get("p50") if isinstance(itl, dict) else None
    client = client_flags(metrics.get("client"), itl_p50, samples, engine)
    return machine_flags(samples) + client + validity_flags(metrics)


def contended(flags: Sequence[JSONMapping] | None) -> bool:
    """Whether a run was measured under contention (CPU, steal or GPU) or by a client that set the pace."""
    return any(f.get("kind") == "machine" for f in flags or [])
