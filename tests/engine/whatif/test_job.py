"""A job's time and memory before it is queued: what-if figures where known, "unknown" where not."""

from __future__ import annotations

from engine.whatif.job import duration, estimate_job

SMALL = {"prompt_tokens": 16, "output_tokens": 4, "requests": 2}


def _spec(source="demo", device="cpu", **workload):
    return {
        "model": {"source": source},
        "recipe": {"engine": "transformers"},
        "workload": {**SMALL, **workload},
        "device": device,
    }


def test_unmeasured_cpu_says_time_unknown_but_knows_the_memory():
    est = estimate_job(_spec(), memory_bytes=24 * 10**9, cores=2)
    assert est.seconds is None and any("not measured" in u for u in est.unknown)
    assert est.fits and 0.5e9 < est.memory_bytes < 2e9
    assert est.summary().startswith("time unknown; needs 1.")


def test_an_8b_model_on_a_2_core_cpu_is_a_loud_warning():
    est = estimate_job(_spec("synthetic:llama-3-8b"), memory_bytes=24 * 10**9, cores=2)
    assert est.fits is False
    assert "does not fit this machine's 22 GiB at float32" in est.summary()  # 24e9 bytes, as the device list says
    assert any("8.0 B parameters" in w and "2 cores" in w for w in est.warnings)


def test_a_catalog_gpu_gets_a_time_from_the_estimator():
    est = estimate_job(
        _spec("synthetic:llama-3-8b", "cuda:0", prompt_tokens=512, output_tokens=64, requests=8),
        device_name="NVIDIA H200",
        memory_bytes=141 * 10**9,
    )
    assert est.seconds is not None and est.seconds > 0 and est.fits
    assert any("what-if estimate on NVIDIA H200" in p for p in est.parts)
    assert "plus the model load" in est.summary()  # no earlier load here: said, not guessed


def test_not_modelled_recipes_and_remote_servers_say_why():
    spec = {**_spec(), "recipe": {"engine": "transformers", "speculative": "prompt_lookup"}}
    est = estimate_job(spec, memory_bytes=24 * 10**9)
    assert est.seconds is None and any("speculative decoding" in u for u in est.unknown)
    assert est.memory_bytes is not None  # speculation does not change the weights' memory
    remote = {**_spec(), "recipe": {"engine": "openai", "model_name": "m"}}
    assert estimate_job(remote).memory_bytes is None


def test_an_earlier_run_of_the_same_recipe_supplies_the_figures(demo_run):
    from storage import runs

    db, run_id = demo_run
    run = runs.get_run(db, run_id)
    est = estimate_job(dict(run.spec), db, memory_bytes=24 * 10**9)
    assert est.seconds is not None, est.unknown
    assert any(f"measured by run {run.id}" in p for p in est.parts)
    assert any("load" in p for p in est.parts)


def test_duration_words():
    assert (duration(None), duration(12), duration(240), duration(3 * 3600)) == ("unknown", "12 s", "4 min", "3.0 h")
