"""Optimize: define a recipe study, watch its trials live, steer it (``?study=NAME`` is its permalink).

A study searches the recipe space of a model on a device for the fastest recipe that keeps
quality (engine/optimize): every trial is a real job the worker runs and stores as a run.
The study's page shows the best feasible recipe in one sentence, the front (feasible against
infeasible trials), every trial with its recipe in words, measured and predicted figures and
the constraint it broke; pause, resume and stop need the operator role; the front and the
trials export as CSV or JSON. The page refreshes itself while the study runs.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any
from urllib.parse import quote

import streamlit as st

from engine.measure import registry
from engine.measure.devices import detect_devices
from engine.measure.stats import min_samples
from engine.optimize.control import change
from engine.optimize.figures import front_figure
from engine.optimize.space import build_space, check_searchable
from engine.optimize.study import (
    DEFAULT_OBJECTIVE,
    PPL_INCREASE,
    StudyDefinition,
    objective_choices,
    parse_definition,
)
from engine.optimize.summary import best_sentence, front_rows, trial_count_words, trial_rows
from engine.spec import SpecError, engines
from storage import StorageError, studies
from ui import auth
from ui.common import database
from ui.launch_estimate import study_estimate
from ui.sla_view import render_sla_section
from ui.text import escape_markdown

REFRESH_S = 2.0
P50_NEEDS = min_samples(50.0)  # requests a trial needs for its p50 objective to have an interval (6)
COLUMNS = {
    "trial": "trial",
    "recipe": "recipe",
    "status": "status",
    "tpot_p50_ms": "TPOT p50 [ms]",
    "ttft_p99_ms": "TTFT p99 [ms]",
    "tokens_per_s": "output tok/s",
    "ppl_increase_pct": "perplexity +%",
    "feasible": "feasible",
    "why": "broken constraint / reason",
    "predicted_tpot_ms": "predicted TPOT [ms]",
    "predicted_ttft_ms": "predicted TTFT [ms]",
    "run_id": "run",
    "job_id": "job",
}


# -- one study ----------------------------------------------------------------------------------
def _act(name: str, action: str) -> None:
    why_not = auth.cannot("launch")
    if why_not:
        st.toast(f"Study {name}: {why_not}")
        return
    db = database()
    study = studies.get_study(db, name) if db is not None else None
    if study is None:
        return
    try:
        _, line = change(db, study, action, by=auth.actor())
    except (StorageError, ValueError) as exc:
        line = f"could not {action} study {name}: {exc}"
    st.toast(escape_markdown(line))


def _buttons(study: Any) -> None:
    why_not = auth.cannot("launch")
    if auth.current().viewer_mode:
        return
    cols = st.columns(3)
    for col, (action, label, allowed) in zip(
        cols,
        (
            ("pause", "Pause", study.status == studies.RUNNING),
            ("resume", "Resume", study.status == studies.PAUSED),
            ("stop", "Stop", not study.is_final),
        ),
        strict=True,
    ):
        col.button(
            label,
            key=f"{action}_{study.id}",
            on_click=_act,
            args=(study.name, action),
            disabled=not allowed or why_not is not None,
            help=why_not,
        )


def _exports(study: Any, rows: list[dict[str, Any]], front: list[dict[str, Any]]) -> None:
    import pandas as pd

    left, right = st.columns(2)
    table = pd.DataFrame([{k: r[k] for k in COLUMNS} for r in rows])
    left.download_button(
        "Trials as CSV", table.to_csv(index=False), file_name=f"{study.name}-trials.csv", mime="text/csv"
    )
    doc = {"study": study.name, "status": study.status, "front": front, "trials": rows}
    right.download_button(
        "Front as JSON",
        json.dumps(doc, indent=2, default=str),
        file_name=f"{study.name}-front.json",
        mime="application/json",
    )


def _rounded(value: Any) -> str:
    """A table cell as text: figures to 3 significant digits (the exports keep every digit), blank when
    there is no value (never "None")."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


@st.fragment(run_every=REFRESH_S)
def live_study(name: str) -> None:
    """The study's status, best recipe, front and trials; reruns on its own while it runs."""
    db = database()
    try:
        study = studies.get_study(db, name) if db is not None else None
        trials = studies.list_trials(db, study.id) if study is not None else []
    except StorageError as exc:
        st.error(f"The study cannot be read: {escape_markdown(exc)}")
        return
    if study is None:
        st.error(f"No study named {escape_markdown(name)!s}. [All studies](optimize)")
        return
    definition = StudyDefinition.model_validate(study.definition)
    pending = sum(1 for t in trials if t.status == studies.PENDING)
    st.markdown(
        f"**{escape_markdown(study.name)}** · `{study.status}` · {trial_count_words(definition, trials)}, "
        f"{pending} in flight · "
        f"objective {', '.join(definition.objectives)}"
    )
    if study.note:
        st.caption(escape_markdown(study.note))
    st.success(escape_markdown(best_sentence(definition, trials)), icon=":material/emoji_events:")
    _buttons(study)
    rows, front = trial_rows(definition, trials), front_rows(definition, trials)
    if front:
        st.plotly_chart(front_figure(front), use_container_width=True, key=f"front_{study.id}")
    if rows:
        shown = [{label: _rounded(r[k]) for k, label in COLUMNS.items()} for r in rows]
        st.dataframe(shown, hide_index=True)
        _exports(study, rows, front)


def study_page(name: str) -> None:
    st.caption(f"Permalink: [?study={escape_markdown(name)}](optimize?study={quote(name)}) · [all studies](optimize)")
    live_study(name)


# -- defining a study ---------------------------------------------------------------------------
def _objective(key: str) -> str:
    """An objective in words: the registry's header (``TPOT p50 [ms]``), with its key."""
    if key == "none":
        return "none"
    if key == PPL_INCREASE:
        return f"perplexity increase over the base recipe [%] ({key})"
    return f"{registry.header(key)} ({key})"


def _pairs(text: str, many: bool) -> dict[str, Any]:
    """``knob=a,b`` lines as a dict (values split on commas when ``many``); malformed lines are skipped."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() and value.strip():
            parts = [v.strip() for v in value.split(",") if v.strip()]
            out[name.strip()] = parts if many else parts[0]
    return out


def _constraints() -> dict[str, Any]:
    st.subheader("Constraints")
    out: dict[str, Any] = {}
    for key, label, default, step in (
        ("max_ppl_increase_pct", "Perplexity increase at most (%)", 2.0, 0.5),
        ("max_kl_mean", "KL mean vs reference at most (nats)", 0.05, 0.01),
        ("max_greedy_flip_rate", "Greedy flip rate at most (0..1)", 0.1, 0.05),
    ):
        if st.checkbox(label, value=key == "max_ppl_increase_pct", key=f"on_{key}"):
            out[key] = st.number_input(
                label, min_value=0.0, value=default, step=step, key=key, label_visibility="collapsed"
            )
    slo = _pairs(st.text_area("Latency SLOs (metric=bound per line)", placeholder="ttft_ms_p99=2000", key="slo"), False)
    out["slo"] = slo
    out["fit_memory"] = st.checkbox("Prune recipes the estimator says do not fit", value=True, key="fit_memory")
    return out


def _base(engine: str) -> dict[str, Any]:
    devices = {d.id: d.label for d in detect_devices()}
    source = st.text_input("Model", value="demo", key="opt_model").strip()
    device = st.selectbox("Hardware", list(devices), format_func=devices.get, key="opt_device")
    c1, c2, c3, c4 = st.columns(4)
    workload = {
        "prompt_tokens": c1.number_input("Prompt tokens", 1, 100_000, 16, key="opt_prompt"),
        "output_tokens": c2.number_input("Output tokens", 1, 100_000, 8, key="opt_output"),
        "requests": c3.number_input(
            "Requests",
            1,
            10_000,
            P50_NEEDS,
            key="opt_requests",
            help=f"per trial; the objective's p50 has a 95 % interval from {P50_NEEDS} requests on",
        ),
    }
    budget_tokens = c4.number_input("Accuracy tokens", 16, 1_000_000, 256, key="opt_quality_tokens")
    return {
        "model": {"source": source},
        "recipe": {"engine": engine},
        "workload": workload,
        "device": device,
        "quality": {"budget_tokens": int(budget_tokens)},
    }


def define_form() -> tuple[dict[str, Any] | None, str | None]:
    """The study the form describes (definition data), or the reason it cannot be created."""
    left, right = st.columns(2)
    with left:
        st.subheader("Model, hardware, engine")
        engine = st.selectbox("Engine", engines.names(), key="opt_engine")
        base = _base(engine)
        descriptor = engines.get(engine)
        fields = [n for n in descriptor.recipe.model_fields if n != "engine"]
        knobs = st.multiselect("Knobs to search", fields, default=list(descriptor.search.knobs), key="knobs")
        values = _pairs(
            st.text_area("Values per knob (knob=a,b per line)", placeholder="drop_layers=0,2", key="values"), True
        )
        pin = _pairs(
            st.text_area("Pinned knobs (knob=value per line)", placeholder="cache_implementation=static", key="pin"),
            False,
        )
    with right:
        st.subheader("Objective and budget")
        choices = objective_choices()
        first = st.selectbox(
            "Objective", choices, index=choices.index(DEFAULT_OBJECTIVE), format_func=_objective, key="objective"
        )
        second = st.selectbox("Pareto against (optional)", ["none", *choices], format_func=_objective, key="objective2")
        trials = st.number_input("Trials", 1, 10_000, 10, key="trials")
        sampler = st.selectbox("Sampler", ["tpe", "nsga2", "random", "grid"], key="sampler")
        constraints = _constraints()
    name = st.text_input("Study name", key="study_name", placeholder="e.g. smol-cpu-ppl2").strip()
    data = {
        "name": name,
        "base": base,
        "objectives": [first] + ([second] if second not in ("none", first) else []),
        "constraints": constraints,
        "budget": {"trials": int(trials)},
        "sampler": sampler,
        "knobs": knobs,
        "values": values,
        "pin": pin,
    }
    if not name:
        return None, "name the study"
    try:
        definition = parse_definition(data)
        check_searchable(build_space(definition), definition.base.device)
    except SpecError as exc:
        return None, str(exc)
    return definition.model_dump(mode="json"), None


def create(db: Any, data: dict[str, Any]) -> None:
    from engine.jobs.submission import check_submittable

    why_not = auth.cannot("launch")
    if why_not:
        st.error(f"Nothing was created: {why_not}")
        return
    try:
        check_submittable(db, StudyDefinition.model_validate(data).effective_base())
        study = studies.create_study(db, data["name"], data, submitted_by=auth.actor())
    except (SpecError, StorageError, ValueError) as exc:
        st.error(f"Nothing was created: {escape_markdown(exc)}")
        return
    st.success(f"Study {escape_markdown(study.name)} created; a worker runs its trials.")
    st.page_link("views/optimize.py", label=f"Open {study.name}", query_params={"study": study.name})


def studies_list(db: Any) -> None:
    rows = studies.list_studies(db)
    if not rows:
        st.info(
            "No studies yet: define one below (or `python -m engine optimize --model demo --knobs dtype,quantization`)."
        )
        return
    for s in rows:
        link = f"[{escape_markdown(s.name)}](optimize?study={quote(s.name)})"
        st.markdown(
            f"{link} · `{s.status}` · {s.created_at:%Y-%m-%d %H:%M}"
            + (f" · {escape_markdown(s.note)}" if s.note else "")
        )


def page() -> None:
    st.title("Optimize")
    db = database()
    if db is None:
        return
    name = st.query_params.get("study")
    if name:
        study_page(name)
        return
    st.caption("Search the recipe space for the fastest recipe that keeps quality; every trial is a real job.")
    listing = st.container()  # filled after the form: a study created by this click is listed
    with st.expander("Define a study", expanded=not studies.list_studies(db, limit=1)):
        data, problem = define_form()
        if problem:
            st.info(f"Cannot create: {escape_markdown(problem)}", icon=":material/block:")
        else:  # how long the study will take, before it is created: the base job's estimate times the trials
            definition = StudyDefinition.model_validate(data)
            with contextlib.suppress(SpecError):  # a pinned knob the base cannot take: Create says why
                study_estimate(db, definition.effective_base(), definition.budget.trials, definition.budget.max_minutes)
        read_only = auth.cannot("launch")
        if st.button("Create study", type="primary", disabled=bool(problem or read_only), help=read_only, key="create"):
            create(db, data)
    with listing:
        studies_list(db)
    st.divider()
    render_sla_section(db)  # the highest load a serving recipe sustains under an SLO (ui/sla_view.py)


page()
