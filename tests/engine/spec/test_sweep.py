"""Sweep grids: one builder for the Launch page and the CLI (pure)."""

from __future__ import annotations

import math

import pytest

from engine.spec import SpecError, parse_job_spec
from engine.spec.sweep import build_grid, concurrency_axis, field_axis, grid_size, grid_specs, rate_axis

BASE = {"model": {"source": "demo"}, "recipe": {"engine": "transformers"}, "workload": {"prompt_tokens": 16}}


def test_field_axes_make_the_product_in_order():
    axes = [field_axis("recipe", "dtype", ["float32", "bfloat16"]), field_axis("workload", "batch_size", [1, 2, 4])]
    assert grid_size(axes) == 6
    points = build_grid(BASE, axes)
    assert [p.label for p in points][:3] == [
        "dtype=float32, batch_size=1",
        "dtype=float32, batch_size=2",
        "dtype=float32, batch_size=4",
    ]
    specs = grid_specs(points)
    assert {(s.recipe.dtype, s.workload.batch_size) for s in specs} == {
        (d, b) for d in ("float32", "bfloat16") for b in (1, 2, 4)
    }
    assert BASE["recipe"] == {"engine": "transformers"}  # the base is not changed


def test_no_axes_is_the_base_alone():
    [point] = build_grid(BASE, [])
    assert point.label == "" and point.where(0, 1) == ""
    assert grid_size([]) == 1 and grid_specs([point])[0].workload.traffic.prompt_tokens == 16


def test_rate_and_concurrency_axes_set_the_arrival():
    base = parse_job_spec({**BASE, "workload": {"prompt_tokens": 16, "batch_size": 4}})
    points = build_grid(base, [rate_axis([2.0, math.inf])])
    assert [p.label for p in points] == ["rate 2/s", "max rate"]
    poisson, burst = grid_specs(points)
    assert (poisson.workload.arrival, poisson.workload.rate, poisson.workload.batch_size) == ("poisson", 2.0, 1)
    assert (burst.workload.arrival, burst.workload.rate) == ("max", None)
    gamma = parse_job_spec({**BASE, "workload": {"arrival": "gamma", "rate": 1.0, "burstiness": 0.5}})
    [point] = grid_specs(build_grid(gamma, [rate_axis([8.0], arrival="gamma")]))
    assert (point.workload.arrival, point.workload.burstiness) == ("gamma", 0.5)
    served = parse_job_spec({**BASE, "workload": {"arrival": "poisson", "rate": 3.0}})
    points = build_grid(served, [concurrency_axis([1, 4])])
    assert [p.label for p in points] == ["concurrency 1", "concurrency 4"]
    assert [(s.workload.arrival, s.workload.max_concurrency, s.workload.rate) for s in grid_specs(points)] == [
        ("concurrency", 1, None),
        ("concurrency", 4, None),
    ]


def test_a_knob_a_point_does_not_use_goes_back_to_its_default():
    base = {**BASE, "recipe": {"engine": "transformers", "gptq_bits": 8, "gptq_group_size": 64}}
    plain, gptq = grid_specs(build_grid(base, [field_axis("recipe", "quantization", ["none", "gptq"])]))
    assert (plain.recipe.gptq_bits, plain.recipe.gptq_group_size) == (4, 128)
    assert plain.fingerprint() == parse_job_spec(BASE).fingerprint()  # it runs the plain recipe
    assert (gptq.recipe.gptq_bits, gptq.recipe.gptq_group_size) == (8, 64)
    arrivals = {**BASE, "workload": {"prompt_tokens": 16, "rate": 4.0}}
    batch, poisson = grid_specs(build_grid(arrivals, [field_axis("workload", "arrival", ["batch", "poisson"])]))
    assert batch.workload.rate is None and poisson.workload.rate == 4.0


def test_a_swept_knob_that_nothing_uses_is_refused_naming_the_point():
    points = build_grid(BASE, [field_axis("recipe", "gptq_bits", [4, 8])])
    with pytest.raises(
        SpecError,
        match=r"job 2 of 2 \(gptq_bits=8\): recipe.transformers: gptq_bits is only used with quantization=gptq",
    ):
        grid_specs(points)


def test_trials_interleave_across_the_grid_round_by_round():
    base = {**BASE, "workload": {"prompt_tokens": 16, "trials": 3}, "name": "nightly"}
    points = build_grid(base, [field_axis("recipe", "dtype", ["float32", "bfloat16"])])
    assert [p.label for p in points] == [
        f"dtype={d}, trial {r} of 3" for r in (1, 2, 3) for d in ("float32", "bfloat16")
    ]  # A B A B A B: drift hits both recipes alike
    specs = grid_specs(points)
    assert {s.workload.trials for s in specs} == {1}
    assert specs[0].name == "nightly (dtype=float32, trial 1 of 3)"
    plain = parse_job_spec({**BASE, "recipe": {"engine": "transformers", "dtype": "float32"}}).fingerprint()
    assert specs[0].fingerprint() == specs[2].fingerprint() == specs[4].fingerprint() == plain
    assert specs[1].fingerprint() != plain


def test_adaptive_stopping_and_single_specs_keep_their_trials_inside():
    adaptive = {**BASE, "workload": {"prompt_tokens": 16, "trials": 3, "until_ci_pct": 2.0}}
    points = build_grid(adaptive, [field_axis("recipe", "dtype", ["float32", "bfloat16"])])
    assert len(points) == 2 and all(p.data["workload"]["trials"] == 3 for p in points)
    [alone] = build_grid({**BASE, "workload": {"prompt_tokens": 16, "trials": 3}}, [])
    assert alone.data["workload"]["trials"] == 3
