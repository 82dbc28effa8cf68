"""Launch page (AppTest): generic recipe fields, validation before submit, sweeps, viewer mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from storage import jobs

QUICK = "quick check: 16 in / 4 out"
APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def app(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.switch_page("views/launch.py")
    at.run()
    assert not at.exception
    return at


def _submit(at):
    return at.button(key="submit")


def _labels(at):
    return {w.label for kind in ("selectbox", "number_input", "checkbox", "text_input") for w in at.get(kind)}


def test_fields_are_labelled_in_words_and_dependent_ones_hidden(app):
    labels = _labels(app)
    assert {"Hardware", "Workload preset", "Precision (dtype)", "Prompt tokens", "TTFT SLO (ms)"} <= labels
    assert not any("_" in label for label in labels), labels
    # nothing uses these with quantization none / speculation none / compile off / one batch arrival
    for hidden in ("GPTQ bits per weight", "Draft tokens per step", "Compile mode", "Request rate (requests/s)"):
        assert hidden not in labels
    assert app.selectbox(key="recipe_transformers_quantization").value == "none"


def test_a_dependent_field_appears_when_its_parent_is_set(app, db):
    app.selectbox(key="recipe_transformers_quantization").select("gptq").run()
    labels = _labels(app)
    assert {"GPTQ bits per weight", "GPTQ group size (weights; -1 per column)", "GPTQ calibration text file"} <= labels
    app.selectbox(key="recipe_transformers_speculative").select("prompt_lookup").run()
    assert {"Prompt-lookup n-gram size (tokens)", "Draft tokens per step"} <= _labels(app)
    app.selectbox(key="recipe_transformers_quantization").select("none").run()
    assert "GPTQ bits per weight" not in _labels(app)


def test_every_preset_offered_here_fills_the_form_with_a_valid_spec(app, db):
    from engine.spec.presets import presets_for

    app.selectbox(key="preset").select(QUICK).run()
    # shape-dependent presets on the demo model (9 heads, 576 hidden): the form says what to change
    fixes = {"gptq_4bit_g128": "pick 64 or 32", "tensor_parallel": "use 3 ranks"}
    for preset, why in presets_for("cpu"):
        button = app.button(key=f"recipe_preset_{preset.key}")
        assert button.disabled == (why is not None), preset.key
        if why:
            assert button.help and why in button.help
            continue
        button.click().run()
        assert not app.exception, preset.key
        errors = [e.value for e in app.error]
        if preset.key in fixes:
            assert any(fixes[preset.key] in e for e in errors), (preset.key, errors)
            continue
        assert not errors, (preset.key, errors)
        assert not _submit(app).disabled
        for knob, value in preset.recipe.items():
            assert app.session_state[f"recipe_transformers_{knob}"] == value, (preset.key, knob)
    assert jobs.list_jobs(db) == []


def test_a_picked_preset_stays_editable_and_is_what_is_queued(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.button(key="recipe_preset_drop_layers").click().run()
    assert any("Preset **Drop N layers**" in c.value for c in app.caption)
    app.number_input(key="recipe_transformers_drop_layers").set_value(2).run()
    assert any("edited" in c.value for c in app.caption)
    _submit(app).click().run()
    [job] = jobs.list_jobs(db)
    assert job.spec["recipe"]["drop_layers"] == 2 and job.spec["recipe"]["drop_layers_from"] == "middle"


def test_an_out_of_range_value_disables_submit_and_queues_nothing(app, db):
    # The browser refused to send a value beyond the input's max (10,000,000 prompt tokens): the field
    # turned red, the page kept 16 and said "Ready", and Submit queued a 16-token job. No client-side
    # bounds now: the value reaches the page, which says what is wrong and disables Submit.
    app.selectbox(key="preset").select(QUICK).run()
    key = f"tr_{QUICK}_synthetic_prompt_tokens"
    assert not any(n.proto.has_max or n.proto.has_min for n in app.number_input), (
        "a bounded input hides the typed value"
    )
    app.text_input(key="job_name").input("ten million").run()
    # typed, then Submit clicked at once: the click arrives together with the new value
    app.number_input(key=key).set_value(10_000_000)
    _submit(app).click().run()
    assert jobs.list_jobs(db) == []
    assert any("Prompt tokens: at most 1,000,000 (10,000,000 given)" in e.value for e in app.error)
    assert not app.success and _submit(app).disabled
    app.number_input(key=key).set_value(1000).run()
    assert any("1,000-token prompts" in s.value for s in app.success)
    _submit(app).click().run()
    [job] = jobs.list_jobs(db)
    assert job.spec["workload"]["traffic"]["prompt_tokens"] == 1000 and job.name == "ten million"


def test_an_estimate_is_shown_before_submit(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    [estimate] = [i.value for i in app.info if i.value.startswith("Estimate")]
    assert "needs" in estimate and "GiB" in estimate


def test_a_large_synthetic_model_on_the_cpu_is_warned_about(app, db):
    app.radio(key="model_kind").set_value("synthetic").run()
    app.selectbox(key="model_arch").set_value("llama-3-8b").run()
    assert any("8.0 B parameters" in w.value and "cores" in w.value for w in app.warning), [
        w.value for w in app.warning
    ]


def test_a_load_sweep_queues_one_job_per_rate(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.radio(key="load_sweep").set_value("rates").run()
    app.text_input(key="load_values").input("1, 4, inf").run()
    assert not app.error, [e.value for e in app.error]
    assert any("Grid: 3 jobs" in c.value for c in app.caption)
    assert any(i.value.startswith("Estimate: 3 jobs") for i in app.info)
    _submit(app).click().run()
    queued = sorted(jobs.list_jobs(db), key=lambda j: j.id)
    assert [j.spec["workload"]["arrival"] for j in queued] == ["poisson", "poisson", "max"]
    assert [j.spec["workload"]["rate"] for j in queued] == [1.0, 4.0, None] and len({j.sweep for j in queued}) == 1


def test_a_load_sweep_stops_at_saturation_unless_told_not_to(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.radio(key="load_sweep").set_value("rates").run()
    app.text_input(key="load_values").input("4, 1, 2").run()
    assert app.checkbox(key="load_stop").value is True  # on by default
    _submit(app).click().run()
    queued = sorted(jobs.list_jobs(db), key=lambda j: j.id)
    assert [j.spec["workload"]["rate"] for j in queued] == [1.0, 2.0, 4.0]  # in increasing order
    assert {j.progress_note for j in queued} == {jobs.STOPS_AT_SATURATION}
    assert any("stopping at saturation" in s.value for s in app.success)
    app.checkbox(key="load_stop").uncheck().run()
    _submit(app).click().run()
    again = sorted(jobs.list_jobs(db), key=lambda j: j.id)[3:]
    assert [j.spec["workload"]["rate"] for j in again] == [4.0, 1.0, 2.0] and {j.progress_note for j in again} == {None}


def test_bad_load_values_are_explained(app, db):
    app.radio(key="load_sweep").set_value("concurrencies").run()
    app.text_input(key="load_values").input("1, 2.5").run()
    assert any("positive whole number" in e.value for e in app.error)
    assert _submit(app).disabled


def test_invalid_combination_is_explained_and_submit_disabled(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.selectbox(key="recipe_transformers_dtype").select("float16").run()
    assert not app.exception
    assert any("float16" in e.value for e in app.error)
    assert _submit(app).disabled
    assert jobs.list_jobs(db) == []


def test_tensor_parallel_ranks_are_checked_against_the_heads(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.checkbox(key="recipe_transformers_tensor_parallel").check().run()
    assert not app.exception
    assert any("9 attention heads" in e.value and "use 3 ranks" in e.value for e in app.error)
    assert _submit(app).disabled
    app.checkbox(key="recipe_transformers_tensor_parallel_ranks__set").check().run()
    app.number_input(key="recipe_transformers_tensor_parallel_ranks").set_value(3).run()
    assert not app.error and not _submit(app).disabled
    assert jobs.list_jobs(db) == []


def test_submit_queues_one_job(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    assert not app.error and not _submit(app).disabled
    _submit(app).click().run()
    assert not app.exception
    [job] = jobs.list_jobs(db)
    assert job.status == "queued" and job.device == "cpu"
    assert job.spec["workload"]["traffic"]["prompt_tokens"] == 16 and job.spec["workload"]["output_tokens"] == 4
    assert any("Queued job" in s.value for s in app.success)


def test_sweep_queues_the_grid_as_one_named_sweep(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.multiselect(key="sweep_fields").set_value([("recipe", "dtype"), ("workload", "batch_size")]).run()
    app.multiselect(key="sweep_recipe_dtype").set_value(["float32", "bfloat16"]).run()
    app.text_input(key="sweep_workload_batch_size").input("1, 2").run()
    app.text_input(key="sweep_name").input("dtype x batch").run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert _submit(app).label == "Submit 4 jobs"
    _submit(app).click().run()
    queued = jobs.list_jobs(db)
    assert len(queued) == 4 and {j.sweep for j in queued} == {"dtype x batch"}
    combos = {(j.spec["recipe"]["dtype"], j.spec["workload"]["batch_size"]) for j in queued}
    assert combos == {("float32", 1), ("float32", 2), ("bfloat16", 1), ("bfloat16", 2)}


def test_bad_sweep_values_are_explained(app, db):
    app.multiselect(key="sweep_fields").set_value([("workload", "batch_size")]).run()
    app.text_input(key="sweep_workload_batch_size").input("1, two").run()
    assert any("two" in e.value for e in app.error)
    assert _submit(app).disabled


def test_model_outside_allowed_roots_is_refused(app, db, tmp_path, monkeypatch):
    from engine.settings import get_settings

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    monkeypatch.setenv("LATENCYLAB_ALLOWED_MODEL_ROOTS", str(allowed))
    get_settings.cache_clear()
    try:
        app.radio(key="model_kind").set_value("local").run()
        app.text_input(key="model_local").input(str(tmp_path / "elsewhere")).run()
        assert not app.exception
        assert any("outside" in e.value for e in app.error)
        assert _submit(app).disabled
    finally:
        monkeypatch.delenv("LATENCYLAB_ALLOWED_MODEL_ROOTS")
        get_settings.cache_clear()
    assert jobs.list_jobs(db) == []


def test_viewer_mode_is_read_only(db, db_url, monkeypatch):
    from engine.settings import get_settings

    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    monkeypatch.setenv("LATENCYLAB_VIEWER_MODE", "1")
    get_settings.cache_clear()
    try:
        at = AppTest.from_file(APP, default_timeout=30)
        at.run()
        at.switch_page("views/launch.py")
        at.run()
        assert not at.exception
        assert any("Viewer mode" in i.value for i in at.info)
        assert _submit(at).disabled
        assert at.selectbox(key="preset").disabled
    finally:
        monkeypatch.delenv("LATENCYLAB_VIEWER_MODE")
        get_settings.cache_clear()


def test_busy_gpu_is_explained_and_groups_offered(db, db_url, monkeypatch):
    from engine.measure import devices

    def fake(ignore_pids=None):
        gpu = lambda i, busy: devices.Device(  # noqa: E731
            id=f"cuda:{i}",
            kind="cuda",
            index=i,
            name="NVIDIA H200",
            memory_total_bytes=141 * 2**30,
            memory_used_bytes=0,
            busy=busy,
            busy_reason="1 process(es) running, 3.0 GiB in use" if busy else None,
        )
        return [devices.cpu_device(), gpu(0, False), gpu(1, True)]

    monkeypatch.setattr(devices, "detect_devices", fake)
    # this machine has no CUDA: skip the runtime pre-flight so that the device check is what speaks
    from engine.run import preflight

    monkeypatch.setattr(preflight, "preflight", lambda spec, **_: None)
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.switch_page("views/launch.py")
    at.run()
    at.selectbox(key="preset").select(QUICK).run()
    assert "cuda:1" in at.selectbox(key="device").options[2]
    at.selectbox(key="device").set_value("cuda:1").run()
    assert any("cuda:1 is busy" in e.value for e in at.error)
    assert _submit(at).disabled
    at.selectbox(key="device").set_value("cuda:0").run()
    at.multiselect(key="device_group").set_value(["cuda:0", "cuda:1"]).run()
    assert any("cuda:1 is busy" in e.value for e in at.error)
    assert jobs.list_jobs(db) == []


def test_a_what_if_link_prefills_the_form(db, db_url, monkeypatch):
    monkeypatch.setenv("LATENCYLAB_DB_URL", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.query_params.update(
        {
            "model": "synthetic:llama-3.2-1b",
            "engine": "transformers",
            "dtype": "bfloat16",
            "batch_size": "4",
            "prompt_tokens": "64",
            "output_tokens": "8",
            "device": "cpu",
        }
    )
    at.switch_page("views/launch.py")
    at.run()
    assert not at.exception
    assert at.radio(key="model_kind").value == "synthetic"
    assert at.selectbox(key="model_arch").value == "llama-3.2-1b"
    assert at.selectbox(key="recipe_transformers_dtype").value == "bfloat16"
    preset = at.selectbox(key="preset").value
    assert at.number_input(key=f"wl_{preset}_batch_size").value == 4
    assert at.number_input(key=f"tr_{preset}_synthetic_prompt_tokens").value == 64


def test_accuracy_choice_goes_into_the_job(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.multiselect(key="quality_metrics").select("ppl").run()
    app.number_input(key="quality_budget").set_value(256).run()
    assert not app.error, [e.value for e in app.error]
    _submit(app).click().run()
    [job] = jobs.list_jobs(db)
    assert job.spec["quality"]["metrics"] == ["ppl"] and job.spec["quality"]["budget_tokens"] == 256


def test_a_knob_nothing_uses_is_hidden_and_submits_its_default(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.checkbox(key="recipe_transformers_compile").check().run()
    app.selectbox(key="recipe_transformers_cache_implementation").select("static").run()
    app.selectbox(key="recipe_transformers_compile_mode").select("max-autotune").run()
    app.checkbox(key="recipe_transformers_compile").uncheck().run()
    assert "Compile mode" not in _labels(app) and not app.error
    _submit(app).click().run()
    [job] = jobs.list_jobs(db)
    assert job.spec["recipe"]["compile_mode"] == "default"


def test_a_sweep_point_that_does_not_use_a_knob_gets_its_default(app, db):
    # the same grid builder as the CLI: on the compile=false point compile_mode would be ignored
    app.selectbox(key="preset").select(QUICK).run()
    app.selectbox(key="recipe_transformers_cache_implementation").select("static").run()
    app.checkbox(key="recipe_transformers_compile").check().run()
    app.selectbox(key="recipe_transformers_compile_mode").select("max-autotune").run()
    app.multiselect(key="sweep_fields").set_value([("recipe", "compile")]).run()
    app.multiselect(key="sweep_recipe_compile").set_value([False, True]).run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    _submit(app).click().run()
    modes = {j.spec["recipe"]["compile"]: j.spec["recipe"]["compile_mode"] for j in jobs.list_jobs(db)}
    assert modes == {False: "default", True: "max-autotune"}


def test_decision_preset_queues_adaptive_stopping(app, db):
    decision = next(o for o in app.selectbox(key="preset").options if o.startswith("decision"))
    app.selectbox(key="preset").select(decision).run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    _submit(app).click().run()
    [job] = jobs.list_jobs(db)
    wl = job.spec["workload"]
    assert (wl["trials"], wl["until_ci_pct"], wl["until_metric"], wl["max_requests"]) == (3, 2.0, "tpot_ms_p50", 1000)


def test_a_sweep_with_trials_interleaves_them(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    preset = app.selectbox(key="preset").value
    app.number_input(key=f"wl_{preset}_trials").set_value(2).run()
    app.multiselect(key="sweep_fields").set_value([("recipe", "dtype")]).run()
    app.multiselect(key="sweep_recipe_dtype").set_value(["float32", "bfloat16"]).run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    _submit(app).click().run()
    queued = sorted(jobs.list_jobs(db), key=lambda j: j.id)
    assert [j.spec["recipe"]["dtype"] for j in queued] == ["float32", "bfloat16", "float32", "bfloat16"]
    assert [j.name for j in queued][:2] == ["dtype=float32, trial 1 of 2", "dtype=bfloat16, trial 1 of 2"]
    assert {j.spec["workload"]["trials"] for j in queued} == {1} and len({j.sweep for j in queued}) == 1


def test_an_edited_preset_says_so_and_ready_names_the_accuracy_measures(app, db):
    """Issue 26, item 5: the workload preset's label stayed "chat: 128 in / 128 out" after editing to 64/16,
    and "Ready" left out the accuracy measures chosen."""
    chat = "chat: 128 in / 128 out"
    app.selectbox(key="preset").select(chat).run()
    app.number_input(key=f"tr_{chat}_synthetic_prompt_tokens").set_value(64).run()
    app.number_input(key=f"wl_{chat}_output_tokens").set_value(16).run()
    assert any(f"Preset “{chat}”, edited: prompt tokens 64, output tokens 16" in c.value for c in app.caption)
    ready = " ".join(s.value for s in app.success)
    assert "64-token prompts → 16 output tokens" in ready and "no accuracy measured" in ready
    app.multiselect(key="quality_metrics").select("ppl").select("fidelity").run()
    ready = " ".join(s.value for s in app.success)
    assert "accuracy: perplexity, fidelity to the reference recipe on 2,048 tokens of default" in ready


def test_an_unmeasured_machine_can_be_measured_from_launch_and_memory_is_in_gib(app, db, monkeypatch):
    """Issue 26, item 5: the estimate said "time unknown" until the user found What-if's calibration button;
    "24 GiB" in the device list stood beside "fits in this machine's 25 GB"."""
    calls = []

    def fake_measure(db_url, device):
        from engine.whatif.microbench import MicrobenchResult, store

        calls.append(device)
        result = MicrobenchResult("cpu", "test CPU", 20.0, {"fp32": 0.07, "bf16": 0.2}, 24 * 10**9, 2, 0.2)
        store(db, result)
        return True, "measured cpu"

    monkeypatch.setattr("engine.whatif.microbench.measure_in_subprocess", fake_measure)
    app.selectbox(key="preset").select(QUICK).run()
    assert "time unknown" in " ".join(i.value for i in app.info)
    app.button(key="launch_measure").click().run()
    assert calls == ["cpu"] and not app.exception
    assert "time unknown" not in " ".join(i.value for i in app.info)
    shown = " ".join(i.value for i in app.info)
    assert "GiB" in shown and " GB" not in shown
