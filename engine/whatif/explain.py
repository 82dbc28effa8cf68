"""Why an estimate is what it is, in words, and the same row for a recipe that is not overhead-bound (pure).

Eager transformers on a GPU is bound by host overhead per step: Python launches one kernel per op, so a
decode step costs ~50 ms on an H100 and an RTX 4090 alike, for a 135M model and an 8B one, and TTFT (one
pass of launches overlapping the kernels) sits below TPOT. That is what the project measured on an H200
(:data:`DATA_FILE`, from FIELD-NOTES), and bare numbers that look the same on every GPU read as a bug.
So each estimate says its bound in words (:func:`lessons`), names the measurements its priors come from
(:func:`priors_source`), shows what each phase's time is made of (:func:`figures`), and an overhead-bound one gets a comparison row (:func:`alternative`): the
static-cache + ``torch.compile`` recipe, whose per-step overhead and bandwidth share are fitted to the
same H200 runs (:func:`compiled_factors`), on a GPU; vLLM's priors on a CPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.whatif.estimate import Estimate, estimate
from engine.whatif.hardware import CATALOG, Hardware
from engine.whatif.recipe import EstimateRecipe, EstimateWorkload
from engine.whatif.roofline import Factors, prior, work
from engine.whatif.shapes import ModelShape

if TYPE_CHECKING:
    from engine.jsonvalue import JSONObject

DATA_FILE = Path(__file__).with_name("priors_h200.json")
COMPILED = "static cache + torch.compile"


@cache
def measurements() -> JSONObject:
    """The H200 runs behind the transformers priors (:data:`DATA_FILE`: source, date, device, runs)."""
    return json.loads(DATA_FILE.read_text(encoding="utf-8"))


def priors_source(family: str, kind: str) -> str:
    """Where a family's priors come from, in one line (named beside every uncalibrated estimate, after "priors: ")."""
    if family in overhead_families() and kind == "gpu":
        data = measurements()
        return (
            f"from the project's {data['device']} runs of {data['date']} ({data['software']}; "
            f"engine/whatif/{DATA_FILE.name}, from FIELD-NOTES)"
        )
    if family == "ideal":
        return "none: data-sheet peaks, no overhead"
    return f"the {family} engine's documented factors (its descriptor), not measured here"


def overhead_families() -> set[str]:
    """The what-if families whose GPU priors are launch-bound (eager, from Python): the family the measurements
    behind the priors were taken with (:data:`DATA_FILE` says which)."""
    return {str(measurements()["family"])}


@cache
def compiled_factors() -> Factors:
    """The transformers GPU priors with the per-step overhead and bandwidth share of the compiled static-cache
    recipe: TPOT = overhead + floor x (measured copy / data-sheet bandwidth) / share, least squares over its runs."""
    data = measurements()
    sheet = CATALOG["h200"].bandwidth_gbs / 1000  # TB/s: the estimator divides by data-sheet bandwidth
    runs = [r for r in data["runs"] if r["recipe"] == COMPILED]
    x = np.asarray([r["floor_ms"] * data["copy_bandwidth_tb_s"] / sheet for r in runs])
    y = np.asarray([r["tpot_ms"] for r in runs])
    slope, overhead = np.polyfit(x, y, 1)  # y = overhead + x / share
    return replace(prior(str(data["family"]), "gpu"), eff_bandwidth=float(1 / slope), step_overhead_ms=float(overhead))


@dataclass(frozen=True)
class Parts:
    """An estimate's times split: overhead and roofline work of prefill and of one decode step (ms)."""

    prefill_overhead_ms: float
    prefill_work_ms: float
    step_overhead_ms: float
    step_work_ms: float
    step_bytes: float


def parts(shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, wl: EstimateWorkload, f: Factors) -> Parts:
    """The pieces :func:`engine.whatif.roofline.phase_times` adds up, for the words."""
    w = work(
        shape,
        hw,
        recipe,
        wl.prompt_tokens,
        wl.output_tokens,
        min(wl.concurrency or recipe.batch_size, recipe.batch_size),
    )
    p_work = max(
        w.prefill_flops / (w.peak_flops * f.eff_compute_prefill), w.prefill_bytes / (w.bandwidth * f.eff_bandwidth)
    )
    d_work = max(
        w.decode_bytes / (w.bandwidth * f.eff_bandwidth), w.decode_flops / (w.peak_flops * f.eff_compute_decode)
    )
    return Parts(f.prefill_overhead_ms, p_work * 1e3, f.step_overhead_ms, d_work * 1e3, w.decode_bytes)


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 10 else f"{value:,.1f} ms"


def figures(e: Estimate, p: Parts) -> str:
    """What each phase's time is made of: ``TTFT 25 ms: launches 25 ms over 0.12 ms of prefill work; TPOT 50.12 ms:
    50 ms overhead per step + 0.12 ms reading weights and KV cache``."""
    hides = "over" if e.prefill_bound == "overhead" else "under"
    return (
        f"TTFT {e.ttft_ms:,.1f} ms: launches {_ms(p.prefill_overhead_ms)} {hides} {_ms(p.prefill_work_ms)} of prefill "
        f"work; TPOT {e.tpot_ms:,.2f} ms: {_ms(p.step_overhead_ms)} overhead per step + {_ms(p.step_work_ms)} "
        f"{'reading weights and KV cache' if e.decode_bound != 'compute' else 'of matmuls'}"
    )


def lessons(e: Estimate, family: str) -> list[str]:
    """What bounds each phase, in words that say what would change it (the same for every row of one bound)."""
    if e.prefill_bound == "overhead":
        first = (
            "first token: one pass of kernel launches hides the prefill's own work, so TTFT is the same on every "
            "GPU and can sit below TPOT"
        )
    else:
        first = f"first token: {BOUND[e.prefill_bound]}"
    if e.decode_bound == "overhead" and family in overhead_families():
        decode = (
            "next tokens: host overhead per step: on this engine the GPU and the model size barely change decode; "
            "torch.compile with a static cache, or vLLM, would"
        )
    elif e.decode_bound == "overhead":
        decode = (
            "next tokens: the engine's fixed cost per step exceeds reading the weights: the model is too small to "
            "keep the GPU busy one request at a time; a larger batch would use it"
        )
    else:
        decode = f"next tokens: {BOUND[e.decode_bound]}"
    return [first, decode]


BOUND = {
    "compute": "compute-bound (the matmuls' FLOPs over the device's throughput)",
    "memory": "memory-bandwidth-bound (reading the weights and KV cache; smaller weights or more bandwidth change it)",
}


def why(e: Estimate, p: Parts, family: str) -> str:
    """The estimate's bound in words and its figures: what sets TTFT and TPOT, and what would change them."""
    return "; ".join(lessons(e, family)) + f" ({figures(e, p)})"


def alternative(
    shape: ModelShape, hw: Hardware, recipe: EstimateRecipe, wl: EstimateWorkload, e: Estimate
) -> tuple[str, Estimate] | None:
    """The same question for a recipe that is not overhead-bound, when ``e``'s decode is: (its name, its estimate)."""
    if e.decode_bound != "overhead" or recipe.engine not in overhead_families():
        return None
    if hw.kind == "gpu":
        data = measurements()
        label = f"{recipe.engine}, {COMPILED} (fitted to the {data['device']} runs of {data['date']})"
        found = estimate(
            shape, hw, recipe, wl, compiled_factors(), f"{COMPILED}: {priors_source(recipe.engine, 'gpu')}"
        )
        found.notes.append("TTFT as eager: the compiled recipe's TTFT was not measured")
        return label, found
    family = serving_family()
    other = replace(recipe, engine=family)
    return f"{family} (documented priors)", estimate(shape, hw, other, wl, prior(family, hw.kind), f"{family} priors")


def serving_family() -> str:
    """The first modelled what-if family of a serving engine (its descriptor says so): the row beside an
    overhead-bound one."""
    from engine.spec import engines
    from engine.whatif.admit import FAMILIES

    return next(
        d.whatif.family
        for d in engines.all_engines()
        if d.capabilities.serving and d.whatif.family in FAMILIES and d.whatif.family not in overhead_families()
    )
