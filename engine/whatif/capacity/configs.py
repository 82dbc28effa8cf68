"""The configurations a capacity plan compares: recipe variants x hardware entries x tensor parallelism.

A **variant** is a name and knobs set on the job's recipe: ``fp8:quantization=fp8,kv_cache_dtype=fp8``
(``base`` alone: the recipe as given). Each variant on each hardware entry at each tensor parallelism is
prepared as a predicted run is (:func:`engine.whatif.predict.run.prepare`): the engine and recipe modelled,
the weights fitting the device's memory, the traffic's longest request fitting the KV space. One that
cannot be is left out with its reason in one line (:class:`LeftOut`); the others get their calibration
(``calibrate(terms, hardware)``: fitted from stored runs and carried to the hardware by the roofline, or
the uncalibrated roofline) and their price.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine.jsonvalue import JSONObject, JSONScalar
from engine.run.plan import RequestPlan
from engine.spec import JobSpec, SpecError, parse_job_spec
from engine.spec.text import knob_value
from engine.whatif.capacity.cost import price_of
from engine.whatif.capacity.sizing import Configuration
from engine.whatif.capacity.traffic import DEFAULT_SAMPLE, DEFAULT_WINDOW_S, Traffic, TrafficError, traffic_of
from engine.whatif.hardware import Hardware
from engine.whatif.predict.calibration import Calibrated
from engine.whatif.predict.deployment import Deployment, Terms, with_acceptance
from engine.whatif.predict.replay import PlanUnavailable, plan_of
from engine.whatif.predict.run import PredictError, prepare

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}")
Calibrate = Callable[[Terms, Hardware], Calibrated]


@dataclass(frozen=True)
class Variant:
    """A recipe variant: its name and the knobs it sets (none: the recipe as given)."""

    name: str
    knobs: dict[str, JSONScalar] = field(default_factory=dict)

    def words(self) -> str:
        """``fp8 (quantization=fp8, kv_cache_dtype=fp8)``."""
        knobs = ", ".join(f"{k}={v}" for k, v in self.knobs.items())
        return f"{self.name} ({knobs})" if knobs else self.name


def parse_variant(text: str) -> Variant:
    """``NAME:KNOB=VALUE,KNOB=VALUE`` (or ``NAME``) as a :class:`Variant`; ValueError in one line."""
    name, _sep, rest = (text or "").strip().partition(":")
    name = name.strip()
    example = "e.g. fp8:quantization=fp8,kv_cache_dtype=fp8 (or base for the recipe as given)"
    if not _NAME.fullmatch(name):
        raise ValueError(f"variant {text!r}: a name of letters, digits and _.+- comes first, {example}")
    knobs: dict[str, JSONScalar] = {}
    for part in (p.strip() for p in rest.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key or key == "engine":
            raise ValueError(f"variant {text!r}: {part!r} is not KNOB=VALUE, {example}")
        knobs[key] = knob_value(value.strip())
    return Variant(name, knobs)


def variants_of(texts: Sequence[str]) -> list[Variant]:
    """The variants given (the recipe as given when none is), each name once; ValueError in one line."""
    found = [parse_variant(t) for t in texts] or [Variant("base")]
    names = [v.name for v in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"variant names must differ: {', '.join(twice)} given twice")
    return found


def on_hardware(spec: JobSpec, variant: Variant, hardware: Hardware, tp: int | None) -> JobSpec:
    """The job as a variant on ``hardware``: its knobs set, a device of the hardware's kind (``cuda:0,1`` for
    tensor parallel 2), the recipe's tensor parallelism ``tp`` where it has one; :class:`SpecError`."""
    data = spec.model_dump(mode="json")
    data["recipe"] = {**data["recipe"], **variant.knobs}
    width = tp or int(data["recipe"].get("tensor_parallel_size") or 1)
    if hardware.kind == "gpu":
        data["device"] = "cuda:" + ",".join(str(i) for i in range(width))
    else:
        data["device"] = "cpu"
    if tp is not None and "tensor_parallel_size" in data["recipe"]:
        data["recipe"]["tensor_parallel_size"] = tp
    return parse_job_spec(data)


def longest(plan: RequestPlan) -> RequestPlan:
    """The plan's one request that needs the most KV space (prompt plus output), for the fit check."""
    firsts = [p for p in plan.measured if not (p.session is not None and p.turn)] or plan.measured[:1]
    return replace(plan, warmup=[], measured=[max(firsts, key=lambda p: p.prompt_tokens + p.output_tokens)])


@dataclass(frozen=True)
class LeftOut:
    """A configuration that cannot be planned, and why in one line."""

    label: str
    reason: str

    def to_dict(self) -> JSONObject:
        return {"configuration": self.label, "reason": self.reason}


def _prepared(
    spec: JobSpec, variant: Variant, hw: Hardware, tp: int | None, check: RequestPlan
) -> tuple[JobSpec, Deployment]:
    """The variant's spec on ``hw`` and its deployment there, checked to fit (PredictError, SpecError)."""
    job = on_hardware(spec, variant, hw, tp)
    try:
        setup = prepare(job, hw, tp, plan=check)
    except PredictError as exc:
        text = str(exc)
        raise PredictError(text.replace("request 0: ", "the traffic's longest request: ", 1)) from exc
    return job, setup.case.deployment


def configurations(
    spec: JobSpec,
    variants: Sequence[Variant],
    hardware: Sequence[Hardware],
    tps: Sequence[int | None],
    plan: RequestPlan,
    calibrate: Calibrate,
    prices: Mapping[str, float] | None = None,
) -> tuple[list[Configuration], list[LeftOut]]:
    """Every variant x hardware x tensor parallelism, prepared and calibrated, and those left out (module doc)."""
    check = longest(plan)
    found: list[Configuration] = []
    left: list[LeftOut] = []
    for variant in variants:
        for hw in hardware:
            for tp in tps:
                label = f"{variant.name} · {hw.key} · TP{tp or 1}"
                try:
                    job, dep = _prepared(spec, variant, hw, tp, check)
                except (PredictError, SpecError) as exc:
                    left.append(LeftOut(label, str(exc).splitlines()[0]))
                    continue
                found.append(_configuration(variant, job, hw, dep, calibrate, prices or {}))
    return found, left


def _configuration(
    variant: Variant, job: JobSpec, hw: Hardware, dep: Deployment, calibrate: Calibrate, prices: Mapping[str, float]
) -> Configuration:
    """A prepared configuration with its calibration (and the speculative acceptance it measured) and price."""
    calibration = calibrate(dep.terms, hw)
    fit = calibration.fit
    if fit is not None and fit.acceptance is not None:
        dep = with_acceptance(dep, fit.acceptance)
    return Configuration(variant.name, job, hw, dep, calibration, price_of(hw, prices))


@dataclass(frozen=True, eq=False)
class Prepared:
    """A plan ready to size: the traffic, the configurations that fit, those left out and why."""

    spec: JobSpec
    traffic: Traffic
    configs: list[Configuration]
    left_out: list[LeftOut]


def prepared(
    spec: JobSpec,
    variants: Sequence[Variant],
    hardware: Sequence[Hardware],
    tps: Sequence[int | None],
    calibrate: Calibrate,
    prices: Mapping[str, float] | None = None,
    *,
    sample: int = DEFAULT_SAMPLE,
    window_s: float = DEFAULT_WINDOW_S,
) -> Prepared:
    """The job's traffic planned (its input files held to the allowed folders first) and sized, and every
    configuration prepared; :class:`TrafficError` in one line when the traffic cannot be planned or sized."""
    from engine.run.policy import check_inputs

    wl = spec.workload
    try:
        check_inputs(spec)
        plan = plan_of(spec)
    except (SpecError, PlanUnavailable) as exc:
        raise TrafficError(str(exc).splitlines()[0]) from exc
    traffic = traffic_of(
        plan, wl.arrival, wl.rate, burstiness=wl.burstiness, seed=wl.seed, max_concurrency=wl.max_concurrency,
        sample=sample, window_s=window_s,
    )  # fmt: skip
    configs, left = configurations(spec, variants, hardware, tps, plan, calibrate, prices)
    return Prepared(spec, traffic, configs, left)


def recalibrated(ready: Prepared, calibrate: Calibrate) -> Prepared:
    """The same configurations under ``calibrate`` (a page checks a question uncalibrated, then runs it calibrated
    without planning its traffic again)."""
    configs = []
    for c in ready.configs:
        dep = c.deployment
        calibration = calibrate(dep.terms, c.hardware)
        if calibration.fit is not None and calibration.fit.acceptance is not None:
            dep = with_acceptance(dep, calibration.fit.acceptance)
        configs.append(replace(c, deployment=dep, calibration=calibration))
    return replace(ready, configs=configs)
