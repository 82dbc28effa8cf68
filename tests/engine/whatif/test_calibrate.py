"""Calibration: runs generated with known factors give those factors back; held-out bands;
the uncalibrated path; factors do not cross from CPU to GPU."""

from __future__ import annotations

import random

import pytest
from whatif_seed import CPU, GRID, TRUE, save_cpu_measurement, seed_mixed, truth

from engine.whatif.calibrate import Calibration, calibrate
from engine.whatif.estimate import EstimateRecipe, EstimateWorkload, model_shape, prior, work
from engine.whatif.fit import fit_factors
from engine.whatif.hardware import CATALOG
from engine.whatif.points import collect_points
from engine.whatif.query import table_rows, what_if


def _truth(model: str, batch: int, prompt: int, output: int = 16) -> tuple[float, float]:
    return truth(model, batch, prompt, output)


def test_fit_recovers_the_generating_factors():
    shape = model_shape("synthetic:smollm2-135m")
    works = [work(shape, CPU, EstimateRecipe(dtype="fp32", batch_size=b), p, 16, b) for b, p in GRID]
    meas = [_truth("synthetic:smollm2-135m", b, p) for b, p in GRID]
    got = fit_factors(works, meas, prior("transformers", "cpu"))
    for name, value in TRUE.to_dict().items():
        assert getattr(got, name) == pytest.approx(value, rel=0.03), name


def _store_runs(db, noise: float = 0.0, seed: int = 0) -> list[int]:
    from storage.runs import NewRun, save_run

    save_cpu_measurement(db)
    rng = random.Random(seed)
    ids = []
    for i, (b, p) in enumerate(GRID):
        model = "demo" if i % 2 else "synthetic:smollm2-135m"
        ttft, tpot = _truth(model, b, p)
        ttft *= 1 + rng.uniform(-noise, noise)
        tpot *= 1 + rng.uniform(-noise, noise)
        spec = {
            "model": {"source": model},
            "recipe": {"engine": "transformers", "dtype": "auto"},
            "workload": {"prompt_tokens": p, "output_tokens": 16, "batch_size": b, "requests": b},
            "device": "cpu",
        }
        ids.append(
            save_run(
                db,
                NewRun(
                    status="done",
                    spec=spec,
                    fingerprint=f"f{i}",
                    model=model,
                    engine="transformers",
                    device="cpu",
                    provenance={"host": "testhost", "applied": {"dtype": "float32"}},
                    metrics={"ttft_ms": {"p50": ttft}, "tpot_ms": {"p50": tpot}},
                ),
            )
        )
    return ids


def test_calibration_from_the_database_recovers_factors_and_a_small_band(db):
    ids = _store_runs(db)
    cal = calibrate(db)
    assert cal.calibrated and not cal.skipped
    (group,) = cal.groups
    assert (group.engine, group.device_kind, group.dtype) == ("transformers", "cpu", "fp32")
    assert sorted(group.run_ids) == sorted(ids)
    for name, value in TRUE.to_dict().items():
        assert getattr(group.factors, name) == pytest.approx(value, rel=0.03), name
    assert group.band is not None and group.band.n_runs == len(GRID)
    assert group.band.ttft_pct < 2 and group.band.tpot_pct < 2
    factors, band, label = cal.for_target("transformers", "cpu", "fp32")
    assert factors == group.factors and band == group.band and label.startswith("calibrated on 12")


def test_noisy_runs_give_an_honest_band(db):
    _store_runs(db, noise=0.2, seed=1)
    (group,) = calibrate(db).groups
    assert 2 < group.band.tpot_pct < 25 and group.band.tpot_p90_pct >= group.band.tpot_pct
    assert len(group.held_out) == len(GRID)


def test_uncalibrated_when_no_runs(db):
    cal = calibrate(db)
    assert not cal.calibrated
    factors, band, label = cal.for_target("transformers", "gpu", "bf16")
    assert factors == prior("transformers", "gpu") and band is None and label.startswith("uncalibrated")
    result = what_if(model_shape("demo"), "demo", [CATALOG["l4"]], EstimateRecipe(), EstimateWorkload(), db=db)
    row = table_rows(result)[0]
    assert row["band_ttft_pct"] is None and row["calibration"].startswith("uncalibrated")
    assert calibrate(None).groups == []


def test_cpu_factors_do_not_cross_to_gpu_but_measured_runs_overlay(db):
    _store_runs(db)
    cal = calibrate(db)
    _, band, label = cal.for_target("transformers", "gpu", "bf16")
    assert band is None and "measured only on cpu" in label
    from engine.whatif.hardware import catalog

    entries = catalog(db)
    result = what_if(
        model_shape("demo"),
        "demo",
        [entries["local:cpu"], CATALOG["a100-80gb"]],
        EstimateRecipe(batch_size=4),
        EstimateWorkload(prompt_tokens=32, output_tokens=16),
        db=db,
    )
    local, gpu = table_rows(result)
    assert local["measured_tpot_ms"] == pytest.approx(_truth("demo", 4, 32)[1])
    assert local["band_tpot_pct"] is not None and gpu["measured_tpot_ms"] is None


def test_runs_without_a_device_measurement_are_skipped_with_a_reason(db):
    from storage.runs import NewRun, save_run

    rid = save_run(
        db,
        NewRun(
            status="done",
            spec={"model": {"source": "demo"}, "workload": {"prompt_tokens": 8}},
            fingerprint="x",
            model="demo",
            engine="transformers",
            device="cpu",
            metrics={"ttft_ms": {"p50": 10.0}, "tpot_ms": {"p50": 5.0}},
        ),
    )
    points, skipped = collect_points(db)
    assert points == [] and skipped == [(rid, "no micro-benchmark of cpu (run: python -m engine calibrate)")]
    assert isinstance(calibrate(db), Calibration)


def test_only_comparable_runs_enter_a_fit_and_the_others_are_listed_with_reasons(db):
    ids = seed_mixed(db)
    cal = calibrate(db)
    by_recipe = {(g.dtype, g.kv, g.method): g for g in cal.groups}
    assert set(by_recipe) == {("fp32", "fp32", ""), ("int4", "fp32", "gptq")}
    plain = by_recipe[("fp32", "fp32", "")]
    # dropped-layer runs are modelled (layer count after dropping), so they join the plain fit
    assert sorted(plain.run_ids) == sorted(ids["plain"] + ids["dropped"])
    for name, value in TRUE.to_dict().items():
        assert getattr(plain.factors, name) == pytest.approx(value, rel=0.03), name
    assert plain.band.ttft_pct < 2 and plain.band.tpot_pct < 2
    assert by_recipe[("int4", "fp32", "gptq")].run_ids == ids["gptq"]
    assert "transformers/int4 (gptq), kv fp32" in by_recipe[("int4", "fp32", "gptq")].label
    reasons = dict(cal.skipped)
    assert {reasons[i] for i in ids["speculative"]} == {"speculative decoding (not modelled)"}
    assert {reasons[i] for i in ids["poisson"]} == {"Poisson load (not modelled)"}
    assert {reasons[i] for i in ids["compile"]} == {"torch.compile (not modelled)"}
    assert cal.left_out == (
        "4 runs left out: 2 Poisson load (not modelled), 1 speculative decoding (not modelled), "
        "1 torch.compile (not modelled)"
    )
    factors, _, label = cal.for_target("transformers", "cpu", "fp32", "fp32")
    assert factors == plain.factors and label.startswith("calibrated on 24 transformers/fp32 run(s)")
