"""Launch: pick a model, a device, an engine, a recipe and a workload, and queue it.

Recipe and workload fields are generated from the pydantic spec models, so a knob
added to a recipe appears here without edits. Every change is validated (the same
pre-flight as ``python -m engine submit``) and the reason is shown before Submit.
A sweep queues the grid of several values for some fields as one named sweep.
"""

from __future__ import annotations

import itertools
import types
import typing
from datetime import datetime
from typing import Any, Literal

import streamlit as st
from pydantic import BaseModel

from engine.measure.devices import detect_devices
from engine.spec import ENGINES, JobSpec, SpecError, Workload, parse_job_spec
from engine.spec.catalog import SYNTHETIC_ARCHITECTURES
from storage import StorageError
from ui.common import database, viewer_mode

MAX_SWEEP_JOBS = 64
PRESETS: dict[str, dict[str, Any]] = {
    "chat: 128 in / 128 out": {"prompt_tokens": 128, "output_tokens": 128, "requests": 8, "batch_size": 1},
    "long prompt: 2048 in / 64 out": {"prompt_tokens": 2048, "output_tokens": 64, "requests": 4, "batch_size": 1},
    "batch throughput": {"prompt_tokens": 128, "output_tokens": 128, "requests": 32, "batch_size": 8},
    "quick check: 16 in / 4 out": {"prompt_tokens": 16, "output_tokens": 4, "requests": 2, "batch_size": 1},
}
MODEL_KINDS = {
    "demo": "Demo model (SmolLM2-135M-Instruct, Q4_1 GGUF dequantized to float32)",
    "synthetic": "Synthetic architecture (random weights, latency only)",
    "local": "Local folder",
    "hf": "Hugging Face id",
    "gguf": "GGUF file",
}


# -- generic field widgets ----------------------------------------------------------------
def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else annotation), True
    return annotation, False


def recipe_classes() -> dict[str, type[BaseModel]]:
    """Recipe model per engine name, read from JobSpec's ``recipe`` field."""
    annotation = JobSpec.model_fields["recipe"].annotation
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    classes = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    out: dict[str, type[BaseModel]] = {}
    for cls in classes:
        engine_field = cls.model_fields.get("engine")
        if engine_field is not None:
            out[str(engine_field.default)] = cls
    return out


def field_kind(annotation: Any) -> tuple[str, Any, bool]:
    """(kind, extra, optional): kind is literal|bool|int|float|str|other; extra the choices."""
    base, optional = _unwrap_optional(annotation)
    if typing.get_origin(base) is Literal:
        return "literal", list(typing.get_args(base)), optional
    if base is bool:
        return "bool", None, optional
    if base is int:
        return "int", None, optional
    if base is float:
        return "float", None, optional
    if base is str:
        return "str", None, optional
    return "other", None, optional


def _bounds(info: Any) -> tuple[Any, Any]:
    lo = hi = None
    for m in info.metadata:
        lo = getattr(m, "ge", lo) if getattr(m, "ge", None) is not None else lo
        hi = getattr(m, "le", hi) if getattr(m, "le", None) is not None else hi
    return lo, hi


def field_widget(name: str, info: Any, default: Any, key: str, disabled: bool = False) -> Any:
    """One input for a pydantic field, chosen from its type; returns the value (None = unset)."""
    kind, choices, optional = field_kind(info.annotation)
    label = name.replace("_", " ")
    help_text = info.description
    if kind == "literal":
        options = ([None] if optional else []) + choices
        index = options.index(default) if default in options else 0
        return st.selectbox(
            label,
            options,
            index=index,
            key=key,
            help=help_text,
            disabled=disabled,
            format_func=lambda v: "(none)" if v is None else str(v),
        )
    if kind == "bool":
        return st.checkbox(label, value=bool(default), key=key, help=help_text, disabled=disabled)
    if kind in ("int", "float"):
        lo, hi = _bounds(info)
        cast = int if kind == "int" else float
        if optional:
            use = st.checkbox(
                f"set {label}",
                value=default is not None,
                key=f"{key}__set",
                disabled=disabled,
                help=help_text or "unset: the engine's default",
            )
            if not use:
                return None
        value = default if default is not None else (lo if lo is not None else cast(0))
        return st.number_input(
            label,
            min_value=None if lo is None else cast(lo),
            max_value=None if hi is None else cast(hi),
            value=cast(value),
            step=cast(1) if kind == "int" else None,
            key=key,
            help=help_text,
            disabled=disabled,
        )
    text = st.text_input(
        label,
        value="" if default is None else str(default),
        key=key,
        help=help_text,
        disabled=disabled,
        placeholder="(none)" if optional else None,
    )
    return text or (None if optional else text)


def parse_values(kind: str, text: str) -> list[Any]:
    """'1, 4, 16' -> [1, 4, 16] for a sweep field; raises SpecError."""
    out: list[Any] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(int(part) if kind == "int" else float(part) if kind == "float" else part)
        except ValueError as exc:
            raise SpecError(f"{part!r} is not a {kind}") from exc
    return out


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
    engine = params.get("engine") if params.get("engine") in recipe_classes() else st.session_state.get("engine")
    engine = engine or next(iter(recipe_classes()), "transformers")
    state["engine"] = engine
    if params.get("device"):
        state["device"] = params["device"]
    preset = st.session_state.get("preset", next(iter(PRESETS)))
    targets = [(recipe_classes()[engine].model_fields, f"recipe_{engine}_"), (Workload.model_fields, f"wl_{preset}_")]
    for fields, prefix in targets:
        for name, info in fields.items():
            raw = params.get(name)
            if raw is None or name == "engine":
                continue
            kind, choices, optional = field_kind(info.annotation)
            try:
                value: Any = {"int": int, "float": float}.get(kind, str)(raw)
            except ValueError:
                continue
            if kind == "bool":
                value = raw.lower() in ("1", "true", "yes", "on")
            if kind == "literal" and value not in choices:
                continue
            state[prefix + name] = value
            if optional and kind in ("int", "float"):
                state[f"{prefix}{name}__set"] = True
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
    return st.text_input(label, key=f"model_{kind}", placeholder=placeholder, disabled=disabled).strip()


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
    ).strip()
    if not metrics and not task:
        return None
    corpus = st.text_input(
        "Corpus",
        value="default",
        key="quality_corpus",
        disabled=disabled,
        help="default (standard-library docstrings, offline), a text file, or hf:<dataset>",
    )
    budget = st.number_input(
        "Token budget", min_value=16, max_value=1_000_000, value=2048, step=256, key="quality_budget", disabled=disabled
    )
    return {
        "metrics": [*metrics, *([f"task:{task}"] if task else [])],
        "corpus": corpus or "default",
        "budget_tokens": int(budget),
    }


def device_picker(db: Any, disabled: bool) -> str:
    from storage import jobs

    devices = detect_devices()
    running = jobs.busy_devices(db)
    labels = {}
    for d in devices:
        extra = f" (running job {running[d.id]})" if d.id in running else ""
        labels[d.id] = d.label + extra
    device = st.selectbox(
        "Hardware",
        list(labels),
        format_func=labels.get,
        key="device",
        disabled=disabled,
        help="The CPU and every CUDA GPU NVML sees; a busy GPU runs another program.",
    )
    gpus = [d.id for d in devices if d.kind == "cuda"]
    if len(gpus) > 1:
        group = st.multiselect(
            "or a GPU group (tensor parallelism)",
            gpus,
            key="device_group",
            disabled=disabled,
            help="Two or more GPUs run the job together as one worker slot (cuda:0+1).",
        )
        if len(group) > 1:
            return "cuda:" + ",".join(g.split(":", 1)[1] for g in sorted(group, key=lambda g: int(g.split(":")[1])))
    return device


def build_specs(base: dict[str, Any], sweep: dict[tuple[str, str], list[Any]]) -> list[tuple[dict[str, Any], str]]:
    """The grid: one spec dict per combination of swept values, with a short label."""
    if not sweep:
        return [(base, "")]
    keys = list(sweep)
    out = []
    for combo in itertools.product(*(sweep[k] for k in keys)):
        spec = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
        parts = []
        for (group, name), value in zip(keys, combo, strict=True):
            spec[group] = {**spec[group], name: value}
            parts.append(f"{name}={value}")
        out.append((spec, ", ".join(parts)))
    return out


def validate(db: Any, specs: list[tuple[dict[str, Any], str]]) -> tuple[list[JobSpec], str | None]:
    """Parse and pre-flight every spec; (specs, None) or ([], one-line reason)."""
    from engine.jobs.worker import check_submittable

    parsed: list[JobSpec] = []
    for i, (data, label) in enumerate(specs):
        try:
            spec = parse_job_spec(data)
            check_submittable(db, spec)
        except SpecError as exc:
            where = f"job {i + 1} of {len(specs)} ({label}): " if label else ""
            return [], f"{where}{exc}"
        except StorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - a checker that breaks must not put a traceback on the page
            return [], f"the spec could not be checked ({type(exc).__name__}: {exc})"
        parsed.append(spec)
    return parsed, None


def page() -> None:
    st.title("Launch a benchmark")
    db = database()
    if db is None:
        return
    read_only = viewer_mode()
    if read_only:
        st.info("Viewer mode: launching jobs is disabled on this deployment.", icon=":material/visibility:")

    prefill_from_link()
    left, right = st.columns(2)
    with left:
        st.subheader("Model and hardware")
        source = model_picker(read_only)
        device = device_picker(db, read_only)
        engines = list(recipe_classes()) or list(ENGINES)
        engine = st.selectbox("Engine", engines, key="engine", disabled=read_only)
        st.subheader("Recipe")
        recipe_cls = recipe_classes().get(engine)
        recipe: dict[str, Any] = {"engine": engine}
        recipe_fields = {n: f for n, f in (recipe_cls.model_fields.items() if recipe_cls else []) if n != "engine"}
        for name, info in recipe_fields.items():
            value = field_widget(
                name, info, info.get_default(call_default_factory=True), f"recipe_{engine}_{name}", read_only
            )
            recipe[name] = value
    with right:
        st.subheader("Workload")
        preset = st.selectbox("Preset", list(PRESETS), key="preset", disabled=read_only)
        workload: dict[str, Any] = {}
        wl_fields = Workload.model_fields
        for name, info in wl_fields.items():
            default = PRESETS[preset].get(name, info.get_default(call_default_factory=True))
            workload[name] = field_widget(name, info, default, f"wl_{preset}_{name}", read_only)
        quality = accuracy_picker(source, read_only)
        name = st.text_input("Name (optional)", key="job_name", disabled=read_only) or None
        timeout = st.number_input(
            "Timeout (s)", min_value=10, max_value=7 * 24 * 3600, value=3600, step=60, key="timeout", disabled=read_only
        )

    with st.expander("Sweep: several values for some fields", expanded=False):
        sweepable = {("recipe", n): f for n, f in recipe_fields.items()}
        sweepable.update(
            {
                ("workload", n): f
                for n, f in wl_fields.items()
                if field_kind(f.annotation)[0] in ("int", "float", "bool", "literal")
            }
        )
        chosen = st.multiselect(
            "Fields to sweep",
            list(sweepable),
            format_func=lambda k: f"{k[0]}.{k[1]}",
            key="sweep_fields",
            disabled=read_only,
        )
        sweep: dict[tuple[str, str], list[Any]] = {}
        sweep_problem = None
        for key in chosen:
            kind, choices, optional = field_kind(sweepable[key].annotation)
            label = f"{key[0]}.{key[1]} values"
            if kind == "literal":
                sweep[key] = st.multiselect(label, choices, key=f"sweep_{key[0]}_{key[1]}", disabled=read_only)
            elif kind == "bool":
                sweep[key] = st.multiselect(label, [False, True], key=f"sweep_{key[0]}_{key[1]}", disabled=read_only)
            else:
                text = st.text_input(
                    f"{label} (comma-separated)",
                    key=f"sweep_{key[0]}_{key[1]}",
                    placeholder="1, 4, 16",
                    disabled=read_only,
                )
                try:
                    sweep[key] = parse_values(kind, text)
                except SpecError as exc:
                    sweep_problem = f"{key[0]}.{key[1]}: {exc}"
            if not sweep.get(key) and sweep_problem is None:
                sweep_problem = f"give at least one value for {key[0]}.{key[1]}"
        sweep_name = (
            st.text_input(
                "Sweep name", key="sweep_name", disabled=read_only, placeholder=f"sweep {datetime.now():%Y-%m-%d %H:%M}"
            )
            if chosen
            else None
        )

    base = {"model": {"source": source}, "recipe": recipe, "workload": workload, "device": device}
    if quality:
        base["quality"] = quality
    if name:
        base["name"] = name
    specs: list[JobSpec] = []
    if not source:
        problem: str | None = "choose a model"
    elif sweep_problem:
        problem = sweep_problem
    else:
        grid = build_specs(base, sweep)
        if len(grid) > MAX_SWEEP_JOBS:
            problem = f"the sweep has {len(grid)} combinations; at most {MAX_SWEEP_JOBS} can be queued at once"
        else:
            try:
                specs, problem = validate(db, grid)
            except StorageError as exc:
                problem = f"the database cannot be read: {exc}"
    st.divider()
    if problem:
        st.error(f"Cannot launch: {problem}", icon=":material/block:")
    else:
        what = f"{len(specs)} jobs (sweep)" if len(specs) > 1 else "1 job"
        st.success(f"Ready: {what} on {device}.", icon=":material/check_circle:")
    label = f"Submit {len(specs)} jobs" if len(specs) > 1 else "Submit"
    if st.button(label, type="primary", disabled=read_only or bool(problem), key="submit"):
        submit(db, specs, chosen, sweep_name, float(timeout))


def submit(db: Any, specs: list[JobSpec], swept: list[Any], sweep_name: str | None, timeout: float) -> None:
    from storage import jobs

    sweep = (sweep_name or f"sweep {datetime.now():%Y-%m-%d %H:%M:%S}") if swept else None
    try:
        ids = jobs.submit_many(db, specs, sweep=sweep, timeout_s=timeout)
    except (StorageError, ValueError) as exc:
        st.error(f"Nothing was queued: {exc}")
        return
    served = {d for w in jobs.list_workers(db, alive_within_s=30) for d in w.devices}
    which = ", ".join(str(i) for i in ids)
    st.success(
        f"Queued job{'s' if len(ids) > 1 else ''} {which}"
        + (f" as sweep '{sweep}'" if sweep else "")
        + ". Follow it on the Jobs page."
    )
    st.page_link("views/jobs.py", label="Open the Jobs page", icon=":material/pending_actions:")
    if specs and specs[0].device not in served:
        st.warning(
            f"No live worker serves {specs[0].device} right now; start one with "
            f"`python -m engine worker --devices {specs[0].device}` (make run starts one)."
        )


page()
