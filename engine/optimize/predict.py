"""The what-if estimator's word on a trial before it runs: predicted TTFT/TPOT and the memory fit.

The prediction is stored beside the measurement, so the estimator's error on real recipes
shows on the study's page (and every measured trial is calibration data for the next).
Recipes the estimator does not model (speculative decoding, compile ...) get the reason
instead of numbers; a device without a measured hardware entry (``python -m engine
calibrate``) gets none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.jsonvalue import JSONMapping, JSONObject
from engine.spec import JobSpec, engines
from engine.whatif.admit import admit
from engine.whatif.calibrate import calibrate
from engine.whatif.estimate import GB, EstimateError, EstimateRecipe, EstimateWorkload, estimate, model_shape
from engine.whatif.hardware import catalog, local_key

if TYPE_CHECKING:
    from storage import Database

Predictor = Callable[[JobSpec], JSONObject]  # the estimator's word on a trial: figures, the fit, or a note
PREDICTED: tuple[str, ...] = ("ttft_ms", "tpot_ms", "output_tokens_per_s")  # the figures a prediction holds


def predictor(db: Database, base: JobSpec) -> Predictor:
    """A function predicting each trial of a study on ``base``'s device (calibrated on the stored runs)."""
    hardware = catalog(db).get(local_key(base.device))
    try:
        shape = model_shape(base.model.source)
    except (EstimateError, ValueError, OSError) as exc:
        reason = f"model shape unknown to the estimator: {exc}"
        return lambda _spec: {"note": reason}
    if hardware is None:
        note = f"no measured hardware entry for {base.device} (measure it: python -m engine calibrate --device {base.device})"
        return lambda _spec: {"note": note}
    cal = calibrate(db)

    def predict(spec: JobSpec) -> JSONObject:
        data = spec.model_dump(mode="json")
        modelled = admit(data, {}, hardware.kind)
        if isinstance(modelled, str):
            return {"note": modelled}
        try:
            recipe = EstimateRecipe(
                engine=engines.get(spec.recipe.engine).whatif.family,  # the estimator models the engine's family
                dtype=modelled.weight,
                kv_dtype=modelled.kv,
                batch_size=spec.workload.batch_size,
                drop_layers=modelled.drop_layers,
            )
            workload = EstimateWorkload(spec.workload.traffic.nominal_prompt_tokens() or 1, spec.workload.output_tokens)
        except EstimateError as exc:
            return {"note": str(exc)}
        factors, band, label = cal.for_target(recipe.engine, hardware.kind, modelled.weight, modelled.kv)
        est = estimate(shape, hardware, recipe, workload, factors, label, band)
        return {
            "ttft_ms": est.ttft_ms,
            "tpot_ms": est.tpot_ms,
            "output_tokens_per_s": est.output_tokens_per_s,
            "fits": est.fits,
            "memory_gb": est.memory.total / GB,
            "usable_gb": est.memory.usable / GB,
            "hardware": hardware.key,
            "calibration": label,
            "note": "; ".join(est.notes),
        }

    return predict


def does_not_fit(prediction: JSONMapping) -> str | None:
    """``does not fit: needs 81.2 GB, 71.3 GB usable`` when the estimator says so; None otherwise."""
    if prediction.get("fits") is not False:
        return None
    return f"does not fit: needs {prediction['memory_gb']:.1f} GB per device, {prediction['usable_gb']:.1f} GB usable"
