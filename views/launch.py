"""Launch: pick a model, a device, a recipe preset (or any engine's knobs) and a workload, and queue it.

Recipe and workload fields are generated from the pydantic spec models, labelled in words
and grouped by :mod:`engine.spec.forms`: a knob appears only when its parent is set, the
rarely changed ones sit in "Advanced". Every change is validated (the same pre-flight as
``python -m engine submit``); Submit is disabled while anything is invalid, with the
reason, and the spec queued is built from exactly the values shown. Before Submit, the
estimate of the job's time and memory on its device (:mod:`engine.whatif.job`). A sweep
queues the grid of several values for some fields, or a serving load sweep (request
rates or concurrencies), as one named sweep.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import streamlit as st

from engine.spec import JobSpec, SpecError, Workload, engines, forms, sources
from engine.spec.catalog import SYNTHETIC_ARCHITECTURES
from engine.spec.sweep import Axis, SweepPoint, build_grid, grid_size, grid_specs
from storage import StorageError
from ui import auth
from ui.common import database
from ui.input_folders import folders_caption, folders_note
from ui.launch_devices import device_picker
from ui.launch_estimate import estimate_panel
from ui.launch_form import field_kind, param_value, section_form
from ui.launch_presets import picked_line, preset_picker
from ui.launch_sweep import grid_caption, sweep_form
from ui.launch_workload import WORKLOAD_PRESETS, workload_form
from ui.text import escape_markdown
from ui.traffic_view import checked_preview, preview_panel

MAX_SWEEP_JOBS = 64
MODEL_KINDS = {
    "demo": "Demo model (SmolLM2-135M-Instruct, Q4_1 GGUF dequantized to float32)",
    "synthetic": "Synthetic architecture (random weights, latency only)",
    "local": "Local folder",
    "hf": "Hugging Face id",
    "gguf": "GGUF file",
}


# -- prefill from a link (e.g. the What-if page's "launch the real benchmark") ------------------
def _model_state(source: str) -> dict[str, Any]:
    if source == "demo":
        return {"model_kind": "demo"}
    if source.startswith("synthetic:") and source.split(":", 1)[1] in SYNTHETIC_ARCHITECTURES:
        return {"model_kind": "synthetic", "model_arch": source.split(":", 1)[1]}
    if source.lower().endswith(".gguf"):
        return {"model_kind": "gguf", "model_gguf": source}
    if source.startswith(("/", "./", "../", "~")):
        return {"model_kind": "local", "model_local": source}
    return {"model_kind": "hf", "model_hf": source.removeprefix("hf:")}


def _field_state(fields: dict[str, Any], prefix: str, params: dict[str, Any]) -> dict[str, Any]:
    """Widget state for every field named in ``params`` whose value the field accepts."""
    state: dict[str, Any] = {}
    for name, info in fields.items():
        raw = params.get(name)
        if raw is None or name == "engine":
            continue
        usable, value = param_value(info, raw)
        if not usable:
            continue
        state[prefix + name] = value
        kind, _, optional = field_kind(info.annotation)
        if optional and kind in ("int", "float"):
            state[f"{prefix}{name}__set"] = True
    return state


def prefill_from_link() -> None:
    """Seed the widgets once from query parameters (model, engine, device, any recipe or
    workload field by name); unknown or invalid values are ignored, the form says why later."""
    params = {k: st.query_params.get(k) for k in st.query_params}
    stamp = repr(sorted(params.items()))
    if not params or st.session_state.get("_prefilled") == stamp:
        return
    st.session_state["_prefilled"] = stamp
    state: dict[str, Any] = {}
    if params.get("model"):
        state.update(_model_state(params["model"]))
    engine = params.get("engine") if params.get("engine") in engines.names() else st.session_state.get("engine")
    engine = engine if engine in engines.names() else engines.default().name
    state["engine"] = engine
    if params.get("device"):
        state["device"] = params["device"]
    preset = st.session_state.get("preset", next(iter(WORKLOAD_PRESETS)))
    state.update(_field_state(engines.recipe_class(engine).model_fields, f"recipe_{engine}_", params))
    state.update(_field_state(Workload.model_fields, f"wl_{preset}_", params))
    source = forms.traffic_of(params)  # the source a link names (source=, or its own fields)
    state.update(_field_state(sources.get(source).model_fields, f"tr_{preset}_{source}_", params))
    state["traffic"] = source
    st.session_state.update(state)


# -- the page -----------------------------------------------------------------------------
def model_picker(disabled: bool) -> str:
    kind = st.radio(
        "Model", list(MODEL_KINDS), format_func=MODEL_KINDS.get, key="model_kind", horizontal=True, disabled=disabled
    )
    if kind == "demo":
        return "demo"
    if kind == "synthetic":
        arch = st.selectbox("Architecture", sorted(SYNTHETIC_ARCHITECTURES), key="model_arch", disabled=disabled)
        return f"synthetic:{arch}"
    prompts = {
        "local": ("Folder", "/path/to/model-folder"),
        "hf": ("Hugging Face id", "org/name"),
        "gguf": ("GGUF file", "/path/to/model.gguf"),
    }
    label, placeholder = prompts[kind]
    # a hub id is downloaded into the cache; a local folder of that name is held to the same folders
    note = (
        folders_note() if kind != "hf" else f"Downloaded into the cache. A local folder of that name: {folders_note()}"
    )
    return st.text_input(label, key=f"model_{kind}", placeholder=placeholder, disabled=disabled, help=note).strip()


def accuracy_picker(source: str, disabled: bool) -> dict[str, Any] | None:
    """The accuracy phase: perplexity, fidelity to the reference recipe, a task; None = none."""
    st.subheader("Accuracy of the same recipe")
    if source.startswith("synthetic:"):
        st.caption("Synthetic weights are random: they have no accuracy, only latency.")
        return None
    metrics = st.multiselect(
        "Measure",
        ["ppl", "fidelity"],
        key="quality_metrics",
        disabled=disabled,
        format_func={
            "ppl": "perplexity on a corpus",
            "fidelity": "fidelity to the reference recipe (KL, top-1, flips)",
        }.get,
        help="Measured by the same engine with the same recipe, after the latency measurement.",
    )
    task = st.text_input(
        "Task (optional)",
        key="quality_task",
        disabled=disabled,
        placeholder="a local .jsonl task file or an lm-evaluation-harness task name",
        help=f"A task file: {folders_note()}",
    ).strip()
    if not metrics and not task:
        return None
    corpus = st.text_input(
        "Corpus",
        value="default",
        key="quality_corpus",
        disabled=disabled,
        help=f"default (standard-library docstrings, offline), a text file, or hf:<dataset>. A text file: {folders_note()}",
    )
    budget = st.number_input(  # no client-side bounds (they hide a typed value): the spec checks 16..10,000,000
        "Token budget (tokens)", value=2048, step=256, key="quality_budget", disabled=disabled, help="16 to 10,000,000"
    )
    return {
        "metrics": [*metrics, *([f"task:{task}"] if task else [])],
        "corpus": corpus or "default",
        "budget_tokens": int(budget),
    }


def validate(db: Any, points: list[SweepPoint]) -> tuple[list[JobSpec], str | None]:
    """Parse and pre-flight every point; (specs, None) or ([], one-line reason)."""
    from engine.jobs.submission import check_submittable

    try:
        specs = grid_specs(points)
    except SpecError as exc:
        return [], str(exc)
    for i, (point, spec) in enumerate(zip(points, specs, strict=True)):
        try:
            check_submittable(db, spec)
        except SpecError as exc:
            return [], f"{point.where(i, len(points))}{exc}"
        except StorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - a checker that breaks must not put a traceback on the page
            return [], f"the spec could not be checked ({type(exc).__name__}: {exc})"
    return specs, None


def _fields(cls: Any) -> dict[str, Any]:
    return {n: f for n, f in (cls.model_fields.items() if cls else []) if n != "engine"}


def _engine_help() -> str:
    """Each engine in a line: its one-line summary (from its descriptor)."""
    return "\n\n".join(f"**{d.name}**: {d.summary}" for d in engines.all_engines())


def recipe_form(engine: str, device: str, source: str, disabled: bool) -> tuple[dict[str, Any], list[str]]:
    """Presets, then the engine's knobs (dependent ones only when used); the recipe as a dict and its problems."""
    st.subheader("Recipe")
    preset_picker(device, source, disabled)
    cls = engines.recipe_class(engine)
    defaults = {n: f.get_default(call_default_factory=True) for n, f in _fields(cls).items()}
    values, problems = section_form(engine, cls, defaults, f"recipe_{engine}_", disabled, device)
    recipe = {"engine": engine, **values}
    line = picked_line(recipe)
    if line:
        st.caption(line)
    return recipe, problems


def check_launch(
    db: Any, base: dict[str, Any], axes: list[Axis], problem: str | None
) -> tuple[list[JobSpec], str | None]:
    """Every job the form would queue, or the reason it cannot launch."""
    if not base["model"]["source"]:
        return [], "choose a model"
    if problem:
        return [], problem
    size = grid_size(axes)
    if size > MAX_SWEEP_JOBS:
        return [], f"the sweep has {size} combinations; at most {MAX_SWEEP_JOBS} can be queued at once"
    try:
        return validate(db, build_grid(base, axes))
    except StorageError as exc:
        return [], f"the database cannot be read: {exc}"


def _timeout(disabled: bool) -> tuple[float, str | None]:
    """The job's timeout (s) and what is wrong with it (checked here, not by the browser: see ui.launch_form)."""
    value = st.number_input("Timeout (s)", value=3600, step=60, key="timeout", disabled=disabled, help="10 s to 7 days")
    ok = 10 <= value <= 7 * 24 * 3600
    if not ok:
        st.error(f"Timeout (s): between 10 and 604,800 ({value:,} given)", icon=":material/error:")
    return float(value), None if ok else f"Timeout (s): between 10 and 604,800 ({value:,} given)"


ACCURACY_WORDS = {"ppl": "perplexity", "fidelity": "fidelity to the reference recipe"}


def _what(specs: list[JobSpec]) -> str:
    """ "16 prompt tokens → 4 output tokens × 2 requests, ..., accuracy: perplexity" of the first spec: the
    values that will be queued, the accuracy measures chosen included."""
    wl = specs[0].workload
    quality = specs[0].quality
    measures = [ACCURACY_WORDS.get(m, m.replace("task:", "task ")) for m in quality.metrics]
    accuracy = (
        f"; accuracy: {', '.join(measures)} on {quality.budget_tokens:,} tokens of {quality.corpus}"
        if quality.enabled
        else "; no accuracy measured"
    )
    traffic = wl.traffic
    if traffic.scheduled:  # its own lengths and schedule; see the preview
        cap = (
            f", at most {wl.requests:,} rows"
            if traffic.default_requests and wl.requests < traffic.default_requests
            else ""
        )
        sent = f"{traffic.words()}{cap}"
    else:
        output = "their own output lengths" if traffic.own_output_lengths() else f"{wl.output_tokens:,} output tokens"
        sent = f"{traffic.words()} → {output} × {wl.requests:,} requests"
    return f"{sent}, {specs[0].recipe.describe()}{accuracy}"


def page() -> None:
    st.title("Launch a benchmark")
    folders_caption()  # where the file fields may point (the allowed folders), or that sign-in is off
    db = database()
    if db is None:
        return
    why_not = auth.cannot("launch")
    read_only = why_not is not None
    if why_not:
        st.info(escape_markdown(f"{why_not[0].upper()}{why_not[1:]}."), icon=":material/visibility:")

    prefill_from_link()
    left, right = st.columns(2)
    with left:
        st.subheader("Model and hardware")
        source = model_picker(read_only)
        device, here = device_picker(db, read_only)
        engine = st.selectbox("Engine", engines.names(), key="engine", disabled=read_only, help=_engine_help())
        recipe, problems = recipe_form(engine, device, source, read_only)
    with right:
        workload, workload_problems = workload_form(read_only, device)
        quality = accuracy_picker(source, read_only)
        name = st.text_input("Name (optional)", key="job_name", disabled=read_only) or None
        timeout, timeout_problem = _timeout(read_only)
    with st.expander("Sweep: several values for some fields, or a serving load sweep", expanded=False):
        choice = sweep_form(engine, read_only)
    axes, sweep_problem = choice.axes, choice.problem

    base = {"model": {"source": source}, "recipe": recipe, "workload": workload, "device": device}
    base.update({k: v for k, v in (("quality", quality), ("name", name)) if v})
    field_problem = next(iter([*problems, *workload_problems, *([timeout_problem] if timeout_problem else [])]), None)
    specs, problem = check_launch(db, base, axes, field_problem or sweep_problem)
    traffic = None
    if specs and not problem:  # the first job's traffic, planned by its own source: a bad file stops Submit here
        traffic, problem = checked_preview(specs[0])
    st.divider()
    if axes:
        st.caption(grid_caption(axes, grid_size(axes)))
    if problem:
        st.error(f"Cannot launch: {escape_markdown(problem)}", icon=":material/block:")
    elif why_not:
        st.info(f"Cannot launch: {escape_markdown(why_not)}.", icon=":material/lock:")
    else:
        what = f"{len(specs)} jobs (sweep)" if len(specs) > 1 else "1 job"
        st.success(f"Ready: {what} on {device}: {escape_markdown(_what(specs))}.", icon=":material/check_circle:")
        preview_panel(traffic, expanded=specs[0].workload.traffic.input_path() is not None)
        estimate_panel(db, specs, here)
    label = f"Submit {len(specs)} jobs" if len(specs) > 1 else "Submit"
    clicked = st.button(
        label, type="primary", disabled=read_only or bool(problem), key="submit", help=why_not or problem
    )
    # A click sent together with a value that makes the form invalid (typed, then Submit) queues nothing.
    if clicked and specs and not problem:
        submit(db, specs, bool(axes), choice.name, timeout, choice.stop_at_saturation)


def submit(
    db: Any, specs: list[JobSpec], swept: bool, sweep_name: str | None, timeout: float, stop: bool = False
) -> None:
    """Queue the jobs (a sweep under its name; ``stop``: each marked to stop at saturation)."""
    from engine.jobs.submission import served_devices
    from storage import jobs

    why_not = auth.cannot("launch")  # asked again: the button is not the only way here
    if why_not:
        st.error(f"Nothing was queued: {escape_markdown(why_not)}")
        return
    sweep = (sweep_name or f"sweep {datetime.now():%Y-%m-%d %H:%M:%S}") if swept else None
    try:
        note = jobs.STOPS_AT_SATURATION if stop and sweep else None
        ids = jobs.submit_many(db, specs, sweep=sweep, timeout_s=timeout, submitted_by=auth.actor(), note=note)
    except (StorageError, ValueError) as exc:
        st.error(f"Nothing was queued: {escape_markdown(exc)}")
        return
    served = served_devices(db)
    which = ", ".join(str(i) for i in ids)
    st.success(
        f"Queued job{'s' if len(ids) > 1 else ''} {which}"
        + (f" as sweep '{escape_markdown(sweep)}'" if sweep else "")
        + (", in increasing order of load, stopping at saturation" if stop and sweep else "")
        + ". Follow it on the Jobs page."
    )
    st.page_link("views/jobs.py", label="Open the Jobs page", icon=":material/pending_actions:")
    if specs and specs[0].device not in served:
        st.warning(
            f"No live worker serves {specs[0].device} right now; start one with "
            f"`python -m engine worker --devices {specs[0].device}` (make run starts one)."
        )


page()
