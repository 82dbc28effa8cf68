"""Memory fit: an entry that does not fit says how much it needs and what would fit instead."""

from __future__ import annotations

from engine.whatif.estimate import EstimateRecipe, EstimateWorkload, estimate, model_shape
from engine.whatif.hardware import CATALOG, Hardware
from engine.whatif.memory import fitting_precision, fitting_tp, memory, no_fit_text

BIG = model_shape("synthetic:llama-3-70b")


def test_a_70b_model_on_one_a100_suggests_the_smallest_tp_and_precision_that_fit():
    hw = CATALOG["a100-80gb"]
    recipe = EstimateRecipe(dtype="bf16")
    assert fitting_tp(BIG, hw, recipe, 128, 32) == 2
    assert fitting_precision(BIG, hw, recipe, 128, 32) == "int8"  # A100 has an int8 path; int8 fits
    assert (
        no_fit_text(BIG, hw, recipe, 128, 32)
        == "does not fit: needs 142 GB, 76 GB usable — try tensor parallel 2 or int8"
    )
    # and the suggestions really fit
    assert memory(BIG, hw, EstimateRecipe(dtype="bf16", tp=2), 128, 32).fits
    assert memory(BIG, hw, EstimateRecipe(dtype="int8"), 128, 32).fits


def test_no_fp8_suggestion_where_the_device_has_no_fp8_path():
    hw = CATALOG["a100-80gb"]
    assert hw.tflops.get("fp8") is None
    assert fitting_precision(BIG, CATALOG["h100-sxm"], EstimateRecipe(dtype="bf16"), 128, 32) == "fp8"


def test_a_small_gpu_needs_more_ways_and_says_so():
    text = no_fit_text(BIG, CATALOG["l4"], EstimateRecipe(dtype="bf16"), 128, 32)
    assert text.startswith("does not fit: needs 142 GB, 23 GB usable — try tensor parallel 8")


def test_a_smaller_batch_is_suggested_and_nothing_is_said_when_it_fits():
    small = model_shape("synthetic:llama-3-8b")
    hw = CATALOG["l4"]
    recipe = EstimateRecipe(dtype="bf16", batch_size=64)
    text = no_fit_text(small, hw, recipe, 4096, 1024)
    assert text is not None and "batch size " in text
    assert no_fit_text(small, CATALOG["h100-sxm"], EstimateRecipe(dtype="bf16"), 128, 32) is None


def test_nothing_fits_a_tiny_device():
    tiny = Hardware(key="t", name="t", vendor="t", kind="cpu", memory_gb=1, bandwidth_gbs=10, tflops={"fp32": 0.1})
    text = no_fit_text(BIG, tiny, EstimateRecipe(dtype="fp32"), 128, 32)
    assert text.endswith("no tensor-parallel degree, smaller precision or batch fits this device: pick a larger one")


def test_the_estimate_carries_the_no_fit_text():
    est = estimate(BIG, CATALOG["a100-80gb"], EstimateRecipe(dtype="bf16"), EstimateWorkload(128, 32))
    assert not est.fits and est.no_fit is not None and est.no_fit in est.notes
    ok = estimate(BIG, CATALOG["a100-80gb"], EstimateRecipe(dtype="bf16", tp=2), EstimateWorkload(128, 32))
    assert ok.fits and ok.no_fit is None
