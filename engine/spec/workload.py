"""What is sent: the workload part of a job spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from pydantic import Field, field_validator, model_validator

from engine.jsonvalue import JSONMapping, JSONObject
from engine.spec import sources
from engine.spec.base import _Strict
from engine.spec.rules import WORKLOAD_DEPENDENCIES, unused_knob_problems
from engine.spec.sources.base import ALWAYS_IN_FINGERPRINT, LEGACY_FLAT_DEFAULTS
from engine.spec.sources.flat import from_flat, merged

Arrival = Literal["batch", "poisson", "gamma", "concurrency", "max"]
# Flat workload fields (Workload.flat) whose defaults are left out of fingerprints (runs from before they existed
# keep theirs): the serving and stopping fields, and the traffic fields of the flat workload of before
# Workload.traffic (engine.spec.sources.base), at their old defaults.
SERVING_DEFAULTS: JSONObject = {
    "arrival": "batch",
    "rate": None,
    "burstiness": 1.0,
    "max_concurrency": None,
    "slo_ttft_ms": None,
    "slo_tpot_ms": None,
    "slo_e2el_ms": None,
    "max_error_rate": None,
    # trials and adaptive stopping (engine/run/repeats.py): at their defaults, one measured phase as before
    "trials": 1,
    "until_ci_pct": None,
    "until_metric": "tpot_ms_p50",
    "max_requests": None,
    "max_seconds": None,
    "soak_minutes": None,  # a soak: rounds of `requests` until the time is up (engine/run/repeats.py)
    "strict_lengths": False,
    "cancel_rate": 0.0,
    "cancel_after_ms": None,
    **{k: v for k, v in LEGACY_FLAT_DEFAULTS.items() if k not in ALWAYS_IN_FINGERPRINT},
}
# The figure adaptive stopping watches: a per-request latency group's percentile, by its metric key.
UntilMetric = Literal[
    "tpot_ms_p50",
    "ttft_ms_p50",
    "e2el_ms_p50",
    "itl_ms_p50",
    "tpot_ms_p90",
    "ttft_ms_p90",
    "e2el_ms_p90",
    "itl_ms_p90",
]
# How until_metric is written in stored specs, canonical JSON and fingerprints (``tpot_ms.p50``, the form
# it had before metric keys had one spelling): read back by the field, written by stored_form(), so every
# stored fingerprint stays. Other spellings users type go through engine.measure.registry.canonical.
UNTIL_METRIC_STORED: dict[str, str] = {key: ".".join(key.rsplit("_", 1)) for key in get_args(UntilMetric)}


def stored_form(workload: JSONObject) -> JSONObject:
    """A workload's JSON (``model_dump(mode="json")``) as canonical JSON and fingerprints write it (in place)."""
    if isinstance(workload.get("until_metric"), str):
        workload["until_metric"] = UNTIL_METRIC_STORED.get(workload["until_metric"], workload["until_metric"])
    return workload


# With --until-ci and no limit given, measuring stops after this many measured requests.
DEFAULT_MAX_REQUESTS = 1000
# Measurement presets (``--preset``, the Launch page): workload fields they set.
# "decision": at least 3 trials (rounds of ``requests`` requests), then more rounds until TPOT p50's
# 95 % interval is within +-2 % (or 1000 requests / 10 minutes measured, whichever comes first).
MEASUREMENT_PRESETS: dict[str, JSONObject] = {
    "quick": {"trials": 1, "until_ci_pct": None, "max_requests": None, "max_seconds": None},
    "decision": {
        "trials": 3,
        "until_ci_pct": 2.0,
        "until_metric": "tpot_ms_p50",
        "max_requests": DEFAULT_MAX_REQUESTS,
        "max_seconds": 600.0,
    },
}


class Workload(_Strict):
    """What is sent: where the prompts come from, output length, how many requests, in what batches.

    The prompts come from one request source, ``traffic`` (:mod:`engine.spec.sources`: synthetic
    lengths, a prompt file, a dataset, sessions, shared prefixes, a trace ...), which says which it is.
    A flat workload (a spec stored before ``traffic`` existed, or flat overrides) is read into it
    (:mod:`engine.spec.sources.flat`), and :meth:`flat` gives that form back for fingerprints.
    """

    traffic: sources.Traffic = Field(default_factory=sources.default_traffic)
    output_tokens: int = Field(default=32, ge=1, le=100_000)
    requests: int = Field(default=8, ge=1, le=1_000_000)
    batch_size: int = Field(default=1, ge=1, le=4096)
    warmup_requests: int | None = Field(default=None, ge=0, le=10_000)  # None: one batch
    ignore_eos: bool = True
    seed: int = Field(default=0, ge=0)
    # Serving load (engine/run/driver.py); the defaults keep the static-batch behaviour above.
    arrival: Arrival = Field(default="batch", description="batch | poisson | gamma | concurrency | max")
    rate: float | None = Field(default=None, gt=0, le=1_000_000, description="poisson/gamma: requests per second")
    burstiness: float = Field(default=1.0, gt=0, le=1000, description="gamma shape (1 = Poisson, <1 burstier)")
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000, description="most requests in flight")
    slo_ttft_ms: float | None = Field(default=None, gt=0, description="goodput SLO on TTFT (ms)")
    slo_tpot_ms: float | None = Field(default=None, gt=0, description="goodput SLO on TPOT (ms)")
    slo_e2el_ms: float | None = Field(default=None, gt=0, description="goodput SLO on E2EL (ms)")
    max_error_rate: float | None = Field(
        default=None, ge=0, le=1, description="fail the run when more than this share of requests failed (0..1)"
    )
    strict_lengths: bool = Field(
        default=False, description="Refuse prompts longer than the model's context instead of clipping them"
    )
    cancel_rate: float = Field(default=0.0, ge=0, le=1, description="Share of requests cancelled (connection closed)")
    cancel_after_ms: float | None = Field(
        default=None, gt=0, le=86_400_000, description="Cancelled requests: ms after their send"
    )
    # Trials and adaptive stopping (engine/run/repeats.py)
    trials: int = Field(default=1, ge=1, le=100, description="measured phases of `requests` requests each")
    until_ci_pct: float | None = Field(
        default=None, gt=0, le=100, description="measure in rounds until the metric's 95 % CI half-width is <= this %"
    )
    until_metric: UntilMetric = Field(default="tpot_ms_p50", description="the figure until_ci_pct watches")
    max_requests: int | None = Field(default=None, ge=1, le=1_000_000, description="until_ci_pct: most requests")
    max_seconds: float | None = Field(default=None, gt=0, le=86_400, description="until_ci_pct: most seconds measured")
    soak_minutes: float | None = Field(
        default=None, gt=0, le=10_080, description="soak: keep sending rounds of `requests` for this many minutes"
    )
    # How the client sends (engine/run/sending.py): the same requests whatever the number; left out of the fingerprint
    client_processes: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="client processes that send the requests, each with its own event loop (None: chosen from the "
        "cores and the concurrency); engines whose requests leave the process only (openai, vllm-server)",
    )
    load_nodes: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Ray nodes the client processes run on, one scheduler for all (engine/jobs/ray_load.py); "
        "the openai engine only (an endpoint other nodes reach)",
    )
    # Profile phase (engine/run/profile.py): after the measured phase; left out of the fingerprint
    profile_steps: int = Field(
        default=0, ge=0, le=1000, description="decode steps recorded with torch.profiler after the measured phase"
    )

    @property
    def warmup(self) -> int:
        """Warm-up requests actually sent (default: one batch, so shapes match)."""
        return self.batch_size if self.warmup_requests is None else self.warmup_requests

    @property
    def request_cap(self) -> int | None:
        """Most measured requests under adaptive stopping (the default cap when no limit is given)."""
        if self.until_ci_pct is None:
            return None
        if self.max_requests is None and self.max_seconds is None:
            return DEFAULT_MAX_REQUESTS
        return self.max_requests

    @property
    def source(self) -> str:
        """The name of the request source that plans this workload's requests (its traffic says it)."""
        return self.traffic.source

    def flat(self) -> JSONObject:
        """The workload as one flat JSON object, its traffic's options beside its other fields, as specs were
        stored before ``traffic`` existed: what fingerprints and the stored knobs hold."""
        return {**self.model_dump(mode="json", exclude={"traffic"}), **self.traffic.flat()}

    @property
    def has_slo(self) -> bool:
        return any(v is not None for v in (self.slo_ttft_ms, self.slo_tpot_ms, self.slo_e2el_ms))

    @field_validator("until_metric", mode="before")
    @classmethod
    def _stored_until_metric(cls, value: object) -> object:
        """The stored form (``tpot_ms.p50``) reads as its metric key."""
        stored = {form: key for key, form in UNTIL_METRIC_STORED.items()}
        return stored.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_arrival(self) -> Workload:
        if self.arrival in ("poisson", "gamma") and self.rate is None:
            raise ValueError(f"arrival={self.arrival} needs a rate (requests per second)")
        if self.arrival == "concurrency" and self.max_concurrency is None:
            raise ValueError("arrival=concurrency needs max_concurrency")
        if self.arrival != "batch" and self.batch_size != 1:
            raise ValueError("batch_size is for arrival=batch; use max_concurrency with other arrivals")
        if self.arrival != "gamma" and self.burstiness != 1.0:
            raise ValueError("burstiness applies to arrival=gamma only")
        problems = unused_knob_problems(WORKLOAD_DEPENDENCIES, dict(self), self.field_defaults())
        if self.until_ci_pct is None:
            problems += [
                f"{knob} is only used with until_ci_pct"
                for knob in ("max_requests", "max_seconds", "until_metric")
                if getattr(self, knob) != SERVING_DEFAULTS[knob]
            ]
        if self.soak_minutes is not None and self.until_ci_pct is not None:
            problems.append("soak_minutes and until_ci_pct both say when to stop; give one of them")
        if (self.cancel_rate > 0) != (self.cancel_after_ms is not None):
            problems.append("cancellations need both cancel_rate (> 0) and cancel_after_ms")
        problems += self.traffic.problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="before")
    @classmethod
    def _read_traffic(cls, data: object) -> object:
        """Flat traffic fields (a spec stored before ``traffic``, flat overrides) read into ``traffic``; a source
        that brings its own request count (a trace: every row) gives ``requests`` when the workload does not."""
        if not isinstance(data, dict):
            return data
        names = sources.flat_field_names()
        flat = {k: v for k, v in data.items() if k in names and k != "traffic"}
        data = {k: v for k, v in data.items() if k not in flat}
        given = data.get("traffic")
        if "traffic" not in data:
            data["traffic"] = from_flat(flat)
        elif flat and isinstance(given, Mapping | sources.TrafficSource):
            data["traffic"] = merged(given, flat)
        elif flat:  # flat fields beside a traffic that is no section: both said, neither read
            raise ValueError(f"give the traffic once: {', '.join(sorted(flat))} beside traffic={str(given)[:40]!r}")
        chosen = data["traffic"]
        name = chosen.source if isinstance(chosen, sources.TrafficSource) else None
        name = chosen.get("source") if isinstance(chosen, Mapping) else name
        cls_ = sources.find(name)
        if cls_ is not None and cls_.default_requests is not None and "requests" not in data:
            data["requests"] = cls_.default_requests
        return data


def apply_preset(workload: JSONMapping, preset: str) -> JSONObject:
    """``workload`` with a measurement preset's fields set (``quick`` or ``decision``); ValueError otherwise."""
    if preset not in MEASUREMENT_PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose {' or '.join(MEASUREMENT_PRESETS)}")
    return {**workload, **MEASUREMENT_PRESETS[preset]}


def flat_workload(workload: JSONMapping | None) -> JSONObject:
    """A stored spec's workload section as flat fields (:meth:`Workload.flat`), whatever shape it was stored in:
    for the readers of many stored runs' specs as dicts (nothing validated: a stored spec was valid when stored)."""
    data = dict(workload or {})
    traffic = data.pop("traffic", None)
    if not isinstance(traffic, Mapping):
        return data  # stored before Workload.traffic: flat already
    cls = sources.find(traffic.get("source"))
    try:
        return {**data, **cls.model_construct(**traffic).flat()} if cls is not None else {**data, **traffic}
    except (AttributeError, TypeError, ValueError):  # a section some later version wrote: its fields as they are
        return {**data, **traffic}
