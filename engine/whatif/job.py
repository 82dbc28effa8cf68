"""Before a job is queued: how long it will take and how much memory it needs on its device.

The time is load + warm-up + measured requests (batches x (TTFT + output tokens x TPOT),
per trial) + a rough accuracy phase. TTFT and TPOT come from the what-if estimator
(:func:`engine.whatif.estimate.estimate`, calibrated by the stored runs) on this
device's hardware entry: a measured local device (``python -m engine calibrate``), or
the catalog entry of a GPU of the same name. Where that entry is missing, an earlier
run of the same model, recipe and device supplies the per-token figures; the load time
is the median of earlier loads of the model on the device. Whatever is not known is
said so ("unknown: ..."), never filled with a guess.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.spec import engines
from engine.spec.workload import flat_workload
from engine.whatif.admit import FAMILIES, NOT_MODELLED, family_terms, nominal_prompt, workload_reason
from engine.whatif.estimate import GB, estimate
from engine.whatif.hardware import Hardware, catalog, local_key
from engine.whatif.memory import memory
from engine.whatif.recipe import EstimateRecipe, EstimateWorkload
from engine.whatif.shapes import EstimateError, model_shape

if TYPE_CHECKING:
    from engine.jsonvalue import JSONMapping, JSONObject
    from engine.spec import JobSpec
    from engine.whatif.calibrate import Calibration
    from engine.whatif.shapes import ModelShape
    from storage import Database
    from storage.runs import RunDetail

PPL_WINDOW = 512  # tokens per perplexity window (engine.accuracy's default)
LARGE_FOR_CPU_PARAMS = 2e9  # a model this large on a CPU gets a loud warning
GIB = 2**30  # what a person sees of a machine's memory (the device list says GiB)
_PRECISION_WORDS = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass
class JobEstimate:
    """What a job will cost, as far as it is known."""

    seconds: float | None = None  # the whole job; None: unknown
    parts: list[str] = field(default_factory=list)  # "load 20 s (median of 3 earlier loads here)", ...
    memory_bytes: float | None = None
    capacity_bytes: float | None = None
    fits: bool | None = None
    precision: str | None = None
    unknown: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    load_known: bool = True

    def summary(self, where: str = "this machine") -> str:
        """One line: "about 4 min; needs 17.0 GiB — does not fit this machine's 22 GiB at float32" (GiB, as the
        device list names a machine's memory)."""
        time = f"about {duration(self.seconds)}" if self.seconds is not None else "time unknown"
        if self.seconds is not None and not self.load_known:
            time += " plus the model load"
        if self.memory_bytes is None:
            return f"{time}; memory unknown"
        need = f"needs {self.memory_bytes / GIB:,.1f} GiB"
        if self.capacity_bytes is None:
            return f"{time}; {need}"
        verdict = "; fits in" if self.fits else " — does not fit"
        at = f" at {_PRECISION_WORDS.get(self.precision or '', self.precision)}" if self.precision else ""
        return f"{time}; {need}{verdict} {where}'s {self.capacity_bytes / GIB:,.0f} GiB{at}"


def duration(seconds: float | None) -> str:
    """12 s, 4 min, 2.5 h; "unknown" for None."""
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _gpu_entry(name: str, memory_bytes: int | None, entries: dict[str, Hardware]) -> Hardware | None:
    """The catalog entry of a GPU called ``name`` by NVML, when exactly one matches (memory within 15 %)."""
    hits = [
        hw
        for hw in entries.values()
        if hw.kind == "gpu"
        and not hw.measured
        and (hw.name == name or hw.name.startswith(name + " "))
        and (not memory_bytes or abs(hw.memory_bytes - memory_bytes) <= 0.15 * hw.memory_bytes)
    ]
    return hits[0] if len(hits) == 1 else None


def device_hardware(device: str, device_name: str, memory_bytes: int | None, db: Database | None) -> Hardware | None:
    """This device's hardware entry: measured here, else a catalog GPU of the same name; None when neither."""
    entries = catalog(db)
    first = device.split(",")[0]
    if local_key(first) in entries:
        return entries[local_key(first)]
    return _gpu_entry(device_name, memory_bytes, entries) if first.startswith("cuda") else None


def _memory_only(kind: str, memory_bytes: int) -> Hardware:
    """An entry that knows only the capacity (for the memory fit; never for a time)."""
    return Hardware(key="here", name="this device", vendor="", kind=kind, memory_gb=memory_bytes / GB, bandwidth_gbs=0)


def _estimate_inputs(spec: JSONMapping, kind: str) -> tuple[EstimateRecipe, EstimateWorkload] | str:
    """The spec in the estimator's terms, or why it is not modelled."""
    recipe = spec.get("recipe") or {}
    engine = recipe.get("engine", engines.default().name)
    descriptor = engines.find(engine)
    if descriptor is not None and descriptor.capabilities.remote:
        return "a remote server: its speed and memory are not this machine's"
    if descriptor is None or descriptor.whatif.family not in FAMILIES:  # the engine's what-if family models it
        return f"{engine}: {descriptor.whatif.left_out if descriptor else 'not a registered engine'} {NOT_MODELLED}"
    family = descriptor.whatif.family
    admitted = workload_reason(flat_workload(spec.get("workload"))) or family_terms(family, recipe, {}, kind)
    if isinstance(admitted, str):
        return admitted
    wl = flat_workload(spec.get("workload"))
    gpus = len(str(spec.get("device", "")).split(",")) if str(spec.get("device", "")).startswith("cuda") else 1
    tp = gpus if recipe.get("tensor_parallel") or int(recipe.get("tensor_parallel_size", 1) or 1) > 1 else 1
    try:
        return (
            EstimateRecipe(
                engine=family,
                dtype=admitted.weight,
                kv_dtype=admitted.kv,
                batch_size=int(wl.get("batch_size", 1)),
                tp=tp if tp in (1, 2, 4, 8, 16) else 1,
                drop_layers=admitted.drop_layers,
            ),
            EstimateWorkload(int(nominal_prompt(wl) or 0), int(wl.get("output_tokens", 32))),
        )
    except (EstimateError, KeyError, TypeError, ValueError) as exc:
        return f"not understood by the estimator: {exc}"


def _memory_spec(spec: JSONMapping) -> JSONObject:
    """The spec with what changes speed but not memory left out (speculation, compile, arrivals ...)."""
    recipe = {
        k: v
        for k, v in (spec.get("recipe") or {}).items()
        if k
        in ("engine", "dtype", "quantization", "gptq_bits", "kv_cache_quantization", "kv_cache_dtype", "drop_layers")
    }
    flat = flat_workload(spec.get("workload"))
    wl = {k: v for k, v in flat.items() if k not in ("arrival", "rate", "burstiness", "max_concurrency")}
    wl["batch_size"] = max(int(flat.get("batch_size", 1)), int(flat.get("max_concurrency") or 1))
    return {**spec, "recipe": recipe, "workload": wl}


def _phase_seconds(spec: JSONMapping, ttft_s: float, tpot_s: float, load_s: float | None) -> tuple[float, list[str]]:
    """Load + warm-up + measured phase, and the words for each part."""
    wl = flat_workload(spec.get("workload"))
    batch = max(1, int(wl.get("batch_size", 1)))
    per_batch = ttft_s + max(0, int(wl.get("output_tokens", 32)) - 1) * tpot_s
    warm = wl.get("warmup_requests")
    warm_batches = 1 if warm is None else math.ceil(int(warm) / batch)
    requests = int(wl.get("requests", 8)) * max(1, int(wl.get("trials", 1)))
    cap = wl.get("max_requests") or (1000 if wl.get("until_ci_pct") is not None else None)
    if cap:
        requests = max(requests, int(cap))
    measured = math.ceil(requests / batch) * per_batch
    if wl.get("until_ci_pct") is not None and wl.get("max_seconds"):
        measured = min(measured, float(wl["max_seconds"]))
    parts = [
        f"warm-up {duration(warm_batches * per_batch)}",
        f"{requests} requests {'(at most) ' if cap else ''}{duration(measured)} "
        f"(TTFT {ttft_s * 1e3:,.0f} ms + {int(wl.get('output_tokens', 32))} × TPOT {tpot_s * 1e3:,.1f} ms per batch)",
    ]
    total = warm_batches * per_batch + measured
    if load_s is not None:
        parts.insert(0, f"load {duration(load_s)}")
        total += load_s
    return total, parts


def _accuracy_seconds(spec: JSONMapping, prefill_s_per_token: float) -> tuple[float | None, str | None]:
    """A rough accuracy phase: the budget's tokens prefilled (twice for fidelity: the reference runs too)."""
    quality = spec.get("quality") or {}
    metrics = quality.get("metrics") or []
    if not metrics:
        return 0.0, None
    if any(str(m).startswith("task:") for m in metrics):
        return None, "the accuracy task's time is unknown (it depends on the task's size)"
    passes = 1 + (1 if "fidelity" in metrics else 0) + (1 if "ppl" in metrics and "fidelity" in metrics else 0)
    return passes * int(quality.get("budget_tokens", 2048)) * prefill_s_per_token, None


def earlier_runs(db: Database | None, spec: JSONMapping, limit: int = 300) -> list[RunDetail]:
    """Done runs of the same model on the same device, newest first (with their specs)."""
    if db is None:
        return []
    from storage import runs

    source = (spec.get("model") or {}).get("source")
    hits = [r for r in runs.list_runs(db, limit=limit, status="done") if r.device == spec.get("device")]
    details = [runs.get_run(db, r.id) for r in hits[:40]]
    return [d for d in details if d is not None and (d.spec.get("model") or {}).get("source") == source]


def _same(a: JSONMapping, b: JSONMapping, keys: tuple[str, ...]) -> bool:
    return all(a.get(k) == b.get(k) for k in keys)


def _load_seconds(earlier: list[RunDetail], spec: JSONMapping) -> tuple[float | None, str]:
    keys = ("engine", "dtype", "quantization", "gptq_bits", "gptq_group_size", "drop_layers")
    loads = [
        float(r.metrics["load_s"])
        for r in earlier
        if _same(r.spec.get("recipe") or {}, spec.get("recipe") or {}, keys) and (r.metrics or {}).get("load_s")
    ]
    if not loads:
        return None, "model load time unknown (no earlier load of this model and precision on this device)"
    return statistics.median(loads), f"median of {len(loads)} earlier load{'s' if len(loads) > 1 else ''} here"


def _measured_latency(earlier: list[RunDetail], spec: JSONMapping) -> tuple[float, float, int] | None:
    """(TTFT s, TPOT s, run id) of an earlier run with the same recipe, prompt length and batch size."""
    wl = flat_workload(spec.get("workload"))
    for r in earlier:
        m, rwl = r.metrics or {}, flat_workload(r.spec.get("workload"))
        same_shape = _same(rwl, wl, ("prompt_tokens", "batch_size", "arrival"))
        if r.spec.get("recipe") == spec.get("recipe") and same_shape and m.get("ttft_ms") and m.get("tpot_ms"):
            return m["ttft_ms"]["p50"] / 1e3, m["tpot_ms"]["p50"] / 1e3, r.id
    return None


def _fit_memory(
    out: JobEstimate, shape: ModelShape, spec: JSONMapping, hw: Hardware | None, mem_bytes: int | None
) -> None:
    kind = "cpu" if spec.get("device", "cpu") == "cpu" else "gpu"
    inputs = _estimate_inputs(_memory_spec(spec), kind)
    target = _memory_only(kind, mem_bytes) if mem_bytes else hw
    if isinstance(inputs, str) or target is None:
        out.unknown.append(f"memory unknown: {inputs if isinstance(inputs, str) else 'device capacity unknown'}")
        return
    recipe, wl = inputs
    m = memory(shape, target, recipe, wl.prompt_tokens, wl.output_tokens)
    out.memory_bytes, out.capacity_bytes, out.fits = m.total, m.capacity, m.fits
    out.precision = recipe.dtype if recipe.dtype != "auto" else ("fp32" if kind == "cpu" else "bf16")


def _latency(
    shape: ModelShape, spec: JSONMapping, hw: Hardware | None, earlier: list[RunDetail], calibration: Calibration | None
) -> tuple[float, float, str] | str:
    """(TTFT s, TPOT s, where from) or the reason the time is unknown."""
    kind = "cpu" if spec.get("device", "cpu") == "cpu" else "gpu"
    inputs = _estimate_inputs(spec, kind)
    if shape is not None and hw is not None and not isinstance(inputs, str):
        recipe, wl = inputs
        factors, band, label = (None, None, "uncalibrated")
        if calibration is not None:
            factors, band, label = calibration.for_target(recipe.engine, hw.kind, *_dtypes(recipe, hw))
        est = estimate(shape, hw, recipe, wl, factors, label, band)
        return est.ttft_ms / 1e3, est.tpot_ms / 1e3, f"what-if estimate on {hw.name} ({label})"
    measured = _measured_latency(earlier, spec)
    if measured:
        return measured[0], measured[1], f"measured by run {measured[2]} (same model, recipe and device)"
    if isinstance(inputs, str):
        return f"time unknown: {inputs}, and no earlier run of this exact recipe here"
    return (
        "time unknown: this device's speed is not measured (What-if page: measure this machine, or "
        "`python -m engine calibrate`), and no earlier run of this exact recipe here"
    )


def _dtypes(recipe: EstimateRecipe, hw: Hardware) -> tuple[str, str]:
    from engine.whatif.recipe import resolve_dtypes

    return resolve_dtypes(recipe, hw)


def estimate_job(
    spec: JobSpec | JSONMapping,
    db: Database | None = None,
    *,
    device_name: str = "",
    memory_bytes: int | None = None,
    calibration: Calibration | None = None,
    cores: int | None = None,
    earlier: list[RunDetail] | None = None,
) -> JobEstimate:
    """Time and memory of one job spec (a JobSpec or its dict) on its device, as far as they are known.

    ``earlier``: :func:`earlier_runs` of the spec's model and device, when the caller has them already."""
    data = spec.model_dump(mode="json") if hasattr(spec, "model_dump") else dict(spec)
    out = JobEstimate()
    device = str(data.get("device", "cpu"))
    try:
        shape = model_shape(str((data.get("model") or {}).get("source", "")))
    except EstimateError as exc:
        out.unknown.append(f"time and memory unknown: the model's architecture is not known here ({exc})")
        return out
    hw = device_hardware(device, device_name, memory_bytes, db)
    _fit_memory(out, shape, data, hw, memory_bytes)
    earlier = earlier_runs(db, data) if earlier is None else earlier
    latency = _latency(shape, data, hw, earlier, calibration)
    if isinstance(latency, str):
        out.unknown.append(latency)
    else:
        ttft_s, tpot_s, source = latency
        load_s, load_words = _load_seconds(earlier, data)
        out.load_known = load_s is not None
        total, parts = _phase_seconds(data, ttft_s, tpot_s, load_s)
        prompt = max(1, nominal_prompt(flat_workload(data.get("workload"))) or 1)
        accuracy, accuracy_unknown = _accuracy_seconds(data, ttft_s / prompt)
        out.parts = [*parts, f"per-token figures: {source}"] + ([f"load: {load_words}"] if load_s is not None else [])
        out.unknown += [w for w in (None if load_s is not None else load_words, accuracy_unknown) if w]
        if accuracy:
            out.parts.insert(len(parts), f"accuracy phase about {duration(accuracy)} (rough)")
        out.seconds = total + (accuracy or 0.0)
    _warn(out, shape, device, cores if cores is not None else os.cpu_count())
    return out


def _warn(out: JobEstimate, shape: ModelShape, device: str, cores: int | None) -> None:
    """A loud line for a large model on a CPU, a job that does not fit, or one that takes hours."""
    if device == "cpu" and shape.params >= LARGE_FOR_CPU_PARAMS:
        weights = shape.params * 4 / GIB
        out.warnings.append(
            f"{shape.name} has {shape.params / 1e9:.1f} B parameters ({weights:,.0f} GiB at float32) and this CPU has "
            f"{cores or '?'} cores: every output token reads all the weights, so expect seconds to minutes per token "
            "(use a smaller model, a GPU, or the What-if page to see the estimate first)"
        )
    if out.fits is False:
        out.warnings.append(
            f"needs {out.memory_bytes / GIB:,.1f} GiB, more than the {out.capacity_bytes / GIB:,.0f} GiB here: "
            "the job would fail or swap; try int8/int4 weights, fewer layers, a shorter context or another device"
        )
    if out.seconds is not None and out.seconds > 3600:
        out.warnings.append(f"the job would take about {duration(out.seconds)}")


# -- an engine that serves one request at a time, under traffic with a rate -------------------------


def serves_one_at_a_time(spec: JSONMapping) -> bool:
    """Whether the spec's engine serves one request at a time (its descriptor declares no ``serving``)."""
    found = engines.find((spec.get("recipe") or {}).get("engine", engines.default().name))
    return found is not None and not found.capabilities.serving


def seconds_per_request(
    spec: JobSpec | JSONMapping,
    db: Database | None = None,
    *,
    prompt_tokens: int | None = None,
    output_tokens: int | None = None,
    device_name: str = "",
    memory_bytes: int | None = None,
    calibration: Calibration | None = None,
    earlier: list[RunDetail] | None = None,
) -> tuple[float, str] | str:
    """(seconds one request takes alone, where the figures come from), or why that is unknown: the job's recipe
    asked about one request of ``prompt_tokens`` and ``output_tokens`` (the workload's by default) at batch 1,
    whatever its arrivals (a trace's lengths come from its preview)."""
    data = spec.model_dump(mode="json") if hasattr(spec, "model_dump") else dict(spec)
    wl = flat_workload(data.get("workload"))
    prompt = int(prompt_tokens or nominal_prompt(wl) or 0)
    if prompt <= 0:
        return "the prompt length is not known"
    out = int(output_tokens or wl.get("output_tokens") or 32)
    one = {**data, "workload": {"prompt_tokens": prompt, "output_tokens": out, "batch_size": 1, "arrival": "batch"}}
    try:
        shape = model_shape(str((data.get("model") or {}).get("source", "")))
    except EstimateError as exc:
        return f"the model's architecture is not known here ({exc})"
    hw = device_hardware(str(data.get("device", "cpu")), device_name, memory_bytes, db)
    latency = _latency(shape, one, hw, earlier or [], calibration)
    if isinstance(latency, str):
        return latency.removeprefix("time unknown: ")
    ttft_s, tpot_s, source = latency
    return ttft_s + max(out - 1, 0) * tpot_s, source
