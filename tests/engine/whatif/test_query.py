"""What-if over hardware: the measured overlay shows only runs whose model, recipe and
workload match the estimate, and the estimator models what calibration admits."""

from __future__ import annotations

import pytest
from whatif_seed import GRID, seed_mixed, truth

from engine.whatif.estimate import EstimateRecipe, EstimateWorkload, model_shape
from engine.whatif.hardware import catalog
from engine.whatif.query import table_rows, what_if

PLAIN_32 = GRID.index((1, 32))


def _row(db, recipe: EstimateRecipe, workload: EstimateWorkload | None = None, model: str = "demo") -> dict:
    result = what_if(
        model_shape(model),
        model,
        [catalog(db)["local:cpu"]],
        recipe,
        workload or EstimateWorkload(prompt_tokens=32, output_tokens=16),
        db=db,
    )
    return table_rows(result)[0]


def test_overlay_shows_only_runs_of_the_same_model_recipe_and_workload(db):
    ids = seed_mixed(db)  # gptq, speculative, Poisson and compiled runs share 32 -> 16 tokens, batch 1
    plain = _row(db, EstimateRecipe())
    assert plain["measured_runs"] == [ids["plain"][PLAIN_32]]
    assert plain["measured_tpot_ms"] == pytest.approx(truth("demo", 1, 32)[1])
    assert _row(db, EstimateRecipe(drop_layers=6))["measured_runs"] == [ids["dropped"][PLAIN_32]]
    assert _row(db, EstimateRecipe(dtype="int4"))["measured_runs"] == ids["gptq"]
    assert _row(db, EstimateRecipe(batch_size=4))["measured_runs"] == [ids["plain"][GRID.index((4, 32))]]
    assert _row(db, EstimateRecipe(kv_dtype="int8"))["measured_runs"] == []
    assert _row(db, EstimateRecipe(), EstimateWorkload(32, 16, concurrency=4))["measured_runs"] == []
    assert _row(db, EstimateRecipe(), model="synthetic:smollm2-135m")["measured_runs"] == []


def test_dropped_layers_are_estimated_with_fewer_layers(db):
    seed_mixed(db)
    for b, p in ((1, 256), (16, 1024)):
        row = _row(db, EstimateRecipe(batch_size=b, drop_layers=6), EstimateWorkload(p, 16))
        want_ttft, want_tpot = truth("demo", b, p, drop_layers=6)
        assert row["ttft_ms"] == pytest.approx(want_ttft, rel=0.03)
        assert row["tpot_ms"] == pytest.approx(want_tpot, rel=0.03)
        full = _row(db, EstimateRecipe(batch_size=b), EstimateWorkload(p, 16))
        assert row["weights_gb"] < full["weights_gb"] and row["tpot_ms"] < full["tpot_ms"]


def test_an_entry_that_does_not_fit_has_no_timings_but_says_what_would_fit():
    shape = model_shape("synthetic:llama-3-70b")
    hw = catalog(None)
    result = what_if(shape, "synthetic:llama-3-70b", [hw["a100-80gb"], hw["mi300x"]], EstimateRecipe(dtype="bf16"),
                     EstimateWorkload(128, 32))  # fmt: skip
    small, big = table_rows(result)
    assert small["fit"] == "does not fit: needs 142 GB, 76 GB usable — try tensor parallel 2 or int8"
    assert small["ttft_ms"] is None and small["tpot_ms"] is None and small["output_tokens_per_s"] is None
    assert big["fit"] == "fits" and big["ttft_ms"] > 0


def test_bound_and_calibration_in_words(db):
    from engine.whatif.query import bound_words

    assert bound_words("compute", "memory") == "first token compute-bound; next tokens memory-bandwidth-bound"
    assert bound_words("overhead", "overhead").endswith("next tokens bound by the engine's per-step overhead")
    seed_mixed(db)
    entries = catalog(db)
    result = what_if(model_shape("demo"), "demo", [entries["local:cpu"], entries["l4"]], EstimateRecipe(),
                     EstimateWorkload(32, 16), db=db)  # fmt: skip
    local, l4 = table_rows(result)
    assert local["calibration_status"].startswith("calibrated from ")
    assert " runs on this CPU, ±" in local["calibration_status"] and local["calibration_status"].endswith(" %")
    assert l4["calibration_status"] == "data-sheet figures only, not calibrated"
    assert local["bound_words"].startswith("first token ")
