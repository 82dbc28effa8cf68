"""Launch page (AppTest): generic recipe fields, validation before submit, sweeps, viewer mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.spec import TransformersRecipe, Workload
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


def test_every_recipe_and_workload_field_has_a_widget(app):
    labels = {w.label for kind in ("selectbox", "number_input", "checkbox", "text_input") for w in app.get(kind)}
    for name in [*TransformersRecipe.model_fields, *Workload.model_fields]:
        if name == "engine":
            continue
        label = name.replace("_", " ")
        assert label in labels or f"set {label}" in labels, name
    assert "Hardware" in labels and "Preset" in labels


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
    assert job.spec["workload"]["prompt_tokens"] == 16 and job.spec["workload"]["output_tokens"] == 4
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
    from engine.run import runner

    monkeypatch.setattr(runner, "preflight", lambda spec, **_: None)
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
    assert at.number_input(key=f"wl_{preset}_prompt_tokens").value == 64


def test_accuracy_choice_goes_into_the_job(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.multiselect(key="quality_metrics").select("ppl").run()
    app.number_input(key="quality_budget").set_value(256).run()
    assert not app.error, [e.value for e in app.error]
    _submit(app).click().run()
    [job] = jobs.list_jobs(db)
    assert job.spec["quality"]["metrics"] == ["ppl"] and job.spec["quality"]["budget_tokens"] == 256


def test_a_knob_set_where_nothing_uses_it_is_explained(app, db):
    app.selectbox(key="preset").select(QUICK).run()
    app.selectbox(key="recipe_transformers_compile_mode").select("max-autotune").run()
    assert any("compile_mode is only used with compile=true" in e.value for e in app.error)
    assert _submit(app).disabled


def test_a_sweep_point_that_does_not_use_a_knob_gets_its_default(app, db):
    # the same grid builder as the CLI: on the compile=false point compile_mode would be ignored
    app.selectbox(key="preset").select(QUICK).run()
    app.selectbox(key="recipe_transformers_cache_implementation").select("static").run()
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
    assert (wl["trials"], wl["until_ci_pct"], wl["until_metric"], wl["max_requests"]) == (3, 2.0, "tpot_ms.p50", 1000)


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
