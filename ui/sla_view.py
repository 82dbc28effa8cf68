"""The SLA finder section (the Optimize page calls :func:`render_sla_section`): define a search, watch its probes.

A search finds the highest request rate (or concurrency) a serving recipe sustains under
an SLO (engine/optimize/sla.py). Its probes are real jobs the worker runs, stored as runs
in the sweep ``sla:<name>``; the workers advance the search every few seconds, so this
section only stores the definition and shows where each search stands, with a link to its
load curve.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import streamlit as st

from engine.optimize import sla
from engine.optimize.slo import SLO_PRESETS, parse_slo
from engine.spec import SpecError, engines, parse_job_spec
from storage import StorageError
from storage import sla as store
from ui import auth
from ui.text import escape_markdown

CUSTOM = "custom"
STATUS_ICONS = {"running": "⏳", "done": "✅", "failed": "❌", "stopped": "⏹️"}


def loadcurve_link(search_name: str) -> str:
    """The load curve page of a search's probes."""
    return f"loadcurve?sweep={quote(sla.sweep_name(search_name), safe='')}"


def render_answer(search: Any) -> None:
    """One search's answer (or where it stands) in a sentence, its goal, and its probes."""
    icon = STATUS_ICONS.get(search.status, "")
    goal = sla.SlaDefinition.model_validate(search.definition).goal()
    if search.answer and search.is_final:
        st.markdown(f"{icon} **{escape_markdown(search.answer['text'])}** · {escape_markdown(goal)}")
        bounds = sla.boundary_words(search.answer)
        st.caption(
            f"{search.answer['probes']} probes; {escape_markdown(search.answer['why'])}"
            + (f" · {escape_markdown(bounds)}" if bounds else "")
        )
    else:
        st.markdown(f"{icon} `{search.status}` · {escape_markdown(goal)}")
        st.caption(escape_markdown(sla.progress_line(search)))
    if search.error:
        st.error(escape_markdown(search.error), icon=":material/error:")
    if search.probes:
        st.dataframe(_probe_rows(search), hide_index=True, width="stretch")


def _probe_rows(search: Any) -> list[dict[str, Any]]:
    rows = []
    for i, p in enumerate(search.probes, 1):
        values = p.get("values") or {}
        ci = p.get("goodput_ci")
        rows.append(
            {
                "probe": i,
                "load": p["load"],
                "verdict": p["status"],
                "goodput": values.get("goodput_fraction"),
                "goodput 95 % CI": "" if not ci else f"{ci[0]:.1%} – {ci[1]:.1%}",
                "run": p.get("run_id"),
                "why": "; ".join(p.get("reasons") or []) or p.get("why", ""),
            }
        )
    return rows


def _engine_choices() -> list[str]:
    """Serving engines first (the SLA finder drives concurrent load), then the others."""
    serving = engines.with_capability("serving")
    return [*serving, *(e for e in engines.names() if e not in serving)]


def _default_engine(choices: list[str]) -> int:
    """The first engine whose server the job manages and reads the /metrics of (its descriptor says)."""
    managed = [
        i
        for i, e in enumerate(choices)
        if (d := engines.get(e)).capabilities.server_metrics and not d.capabilities.remote
    ]
    return managed[0] if managed else 0


def _form_values() -> dict[str, Any] | None:
    """The definition form; its values when submitted."""
    with st.form("sla_form", border=True):
        c1, c2, c3 = st.columns(3)
        model = c1.text_input("Model", value="demo", help="demo | synthetic:<arch> | org/name | ./folder")
        serving = _engine_choices()
        engine = c2.selectbox("Engine", serving, index=_default_engine(serving))
        device = c3.text_input("Device", value="cpu", help="cpu | cuda:N | cuda:N,M")
        w1, w2, w3 = st.columns(3)
        prompt = w1.number_input("Prompt (tokens)", min_value=1, max_value=1_000_000, value=128)
        output = w2.number_input("Output (tokens)", min_value=1, max_value=100_000, value=32)
        requests = w3.number_input("Requests per probe", min_value=1, max_value=100_000, value=50)
        s1, s2, s3 = st.columns(3)
        preset = s1.selectbox(
            "SLO", [*SLO_PRESETS, CUSTOM], format_func=lambda k: SLO_PRESETS[k][0] if k in SLO_PRESETS else k
        )
        custom = s2.text_input("Custom SLO", value="ttft_ms_p99=300,tpot_ms_p99=50", help="used when SLO is custom")
        goodput = s3.number_input("Goodput target (share of requests)", 0.01, 1.0, 0.99, step=0.01)
        a1, a2, a3, a4 = st.columns(4)
        axis = a1.selectbox(
            "Axis", ["rate", "concurrency"], format_func={"rate": "request rate", "concurrency": "concurrency"}.get
        )
        start = a2.number_input("Start load", min_value=0.01, max_value=1_000_000.0, value=1.0)
        resolution = a3.number_input("Resolution", min_value=0.01, max_value=1_000_000.0, value=0.25)
        probes = a4.number_input("Most probes", min_value=1, max_value=100, value=8)
        # the default is fixed once per session: a default that changed every second made a new widget on
        # each rerun, which threw away the name the user had typed
        default = st.session_state.setdefault("sla_default_name", f"sla-{time.strftime('%Y%m%d-%H%M%S')}")
        name = st.text_input("Search name", value=default)
        why_not = auth.cannot("launch")
        if not st.form_submit_button("Start the search", disabled=why_not is not None, help=why_not):
            return None
    spec = {
        "model": {"source": model},
        "recipe": {"engine": engine},
        "device": device,
        "workload": {"prompt_tokens": int(prompt), "output_tokens": int(output), "requests": int(requests)},
    }
    fields = {"axis": axis, "goodput": goodput, "start": start, "resolution": resolution, "max_probes": int(probes)}
    return {"spec": spec, "slo": custom if preset == CUSTOM else preset, "fields": fields, "name": name.strip()}


def _start(db: Any, values: dict[str, Any]) -> None:
    """Check and store a search from the form (nothing stored when anything is wrong)."""
    from engine.jobs.submission import check_submittable

    try:
        slo_name, bounds = parse_slo(values["slo"])
        definition = sla.new_definition(parse_job_spec(values["spec"]), slo_name, bounds, **values["fields"])
        for load in (definition.start, definition.start * 2):
            check_submittable(db, sla.probe_spec(definition, load, "check"))
        if not values["name"]:
            raise SpecError("give the search a name")
        search = sla.start(db, values["name"], definition, submitted_by=auth.actor())
    except (SpecError, ValueError, StorageError) as exc:
        st.error(f"Not started: {escape_markdown(exc)}", icon=":material/error:")
        return
    st.success(f"Search **{escape_markdown(search.name)}** started; a worker runs its probes.")


def render_sla_section(db: Any) -> None:
    """The SLA finder: a form for a new search, then every search with its answer and load curve."""
    st.subheader("Highest sustainable load (SLA finder)")
    st.caption(
        "The highest request rate (or concurrency) a serving recipe sustains while the share of requests "
        "meeting the SLO stays at the goodput target: bracketing (doubling or halving), then bisection to "
        "the resolution. Every probe is a real run, queued to the worker and stored in the sweep "
        "`sla:<name>`. Same from the command line: `python -m engine sla --model demo --engine vllm-server "
        "--slo chat --wait`."
    )
    values = _form_values()
    if values is not None:
        _start(db, values)
    try:
        searches = store.list_searches(db, limit=20)
    except StorageError as exc:
        st.error(f"The searches cannot be read: {escape_markdown(exc)}")
        return
    if not searches:
        st.info("No SLA searches yet.")
        return
    for search in searches:
        with st.container(border=True):
            st.markdown(f"**{escape_markdown(search.name)}** · [load curve]({loadcurve_link(search.name)})")
            render_answer(search)
